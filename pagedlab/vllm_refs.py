"""Every vLLM file, function and PR a notebook names, once, with the commit it was read at.

vLLM moves fast: a file's behaviour is only true *as of* a commit. Each :class:`Ref` below
names one file of vLLM (``github.com/vllm-project/vllm``), the functions the notebooks cite
from it, the commit whose text was read, and what that text does, in one or two sentences.
Each :class:`PullRequest` is a change the notebooks date a behaviour by. Notebooks say "as
of vLLM ``<commit>``" with the short commit of :func:`ref` and print :func:`table` (notebook
08); ``tests/notebooks/test_vllm_refs.py`` checks that every vLLM path and PR a notebook
names is here.

The V0 engine (``vllm/core/``, ``vllm/worker/``) has been removed from vLLM; its entries are
pinned to the last commit of each file that the reading index holds.

**Re-pinned to vLLM 0.33.0** (release of 2026-11-01, commit ``4ba787ec9``): where a file's
behaviour changed by that release, its entry carries a :class:`Repin` saying what is true *as
of 0.33.0* and what text that was read from (vLLM's own tree at that commit is not in the
reading index: the 0.33 text was read in public copies of those files, each named). The
original pin stays, dated: what a notebook says "as of" it remains true of that commit.
Every statement here begins "as of": :func:`statement`. Hugging Face's engine is cited from
``transformers`` 5.24.0, read in the installed package (:data:`HF_REFS`; the tests check that
each file and name exists there).

This module imports nothing from pagedlab (every layer may import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

VLLM_RELEASE = "0.33.0"
VLLM_RELEASE_COMMIT = "4ba787ec9"  # as the release gives it (short)
HF_VERSION = "5.24.0"


@dataclass(frozen=True)
class Repin:
    """What one file does as of vLLM 0.33.0, where that changed since the original pin."""

    names: tuple[str, ...]  # what notebook 11 cites of it at 0.33.0
    read: str  # what the 0.33.0 code does, as the notebooks rely on it
    source: str  # which text was read
    release: str = VLLM_RELEASE
    commit: str = VLLM_RELEASE_COMMIT

    @property
    def short(self) -> str:
        return self.commit[:7]


@dataclass(frozen=True)
class Ref:
    """One vLLM file as read at ``commit``: what the notebooks cite of it, and what it does."""

    path: str
    names: tuple[str, ...]  # functions, classes or settings the notebooks name
    commit: str  # 40 hex digits
    read: str  # what the code at that commit does, as the notebooks rely on it
    engine: str = "V1"  # V1 (today's engine), V0 (removed), kernel (csrc, both engines)
    repin: Repin | None = None  # what changed as of vLLM 0.33.0

    @property
    def short(self) -> str:
        return self.commit[:7]

    @property
    def shorts(self) -> tuple[str, ...]:
        """Every commit this file is pinned at (the original, then the 0.33.0 re-pin)."""
        return (self.short,) + ((self.repin.short,) if self.repin else ())


@dataclass(frozen=True)
class PullRequest:
    """A vLLM pull request the notebooks date a behaviour by (merged on ``date``)."""

    number: int
    date: str  # YYYY-MM-DD, from the thread
    title: str
    change: str


REFS: Mapping[str, Ref] = MappingProxyType({
    "block_pool": Ref(
        "vllm/v1/core/block_pool.py",
        ("BlockPool", "BlockPool.free_blocks", "BlockPool.get_new_blocks", "null_block",
         "cache_full_blocks", "_maybe_evict_cached_block"),
        "c59cb7941357443da7c5eef75cfa8697d683d228",
        "free_blocks splits the blocks whose ref count reached 0: those without a hash go to "
        "the front of the free queue (prepend_n: reused first), hashed ones to the back "
        "(append_n), each group in the order given; get_new_blocks pops from the front and "
        "evicts a popped block's hash. __init__ pops block 0 off the queue as the null block, "
        "never freed or cached. Only full blocks get a hash (cache_full_blocks).",
        repin=Repin(
            ("BlockPool.free_blocks", "null_block", "cache_partial_block", "hash_block_size"),
            "free_blocks still puts blocks without a hash at the front of the free queue and "
            "hashed ones at the back, and block 0 is still the null block; BlockPool now takes "
            "a hash_block_size (prefix_match_unit), and cache_partial_block makes an existing "
            "block findable from a boundary inside it (a partial entry, no new block).",
            "cache_partial_block's text in public annotated copies of the 0.33-era block_pool.py "
            "(the reading index's own vLLM tree stops at c59cb79)",
        ),
    ),
    "single_type_kv_cache_manager": Ref(
        "vllm/v1/core/single_type_kv_cache_manager.py",
        ("SingleTypeKVCacheManager.free",),
        "129ab7c60cbb8eb11e875373e67f7e521b74aa30",
        "free passes a finished request's blocks to BlockPool.free_blocks in reverse "
        "(reversed(req_blocks)): its last block first.",
        repin=Repin(
            ("_apply_cow", "allocate_new_blocks", "take_pending_cow_copies",
             "SlidingWindowManager.remove_skipped_blocks"),
            "a local hit that ends inside a block is recorded by add_local_computed_blocks; "
            "allocate_new_blocks then takes a fresh block and _apply_cow puts it in the "
            "request's table in place of the shared one, queues (source, copy) and gives the "
            "copy one extra reference, the source keeping the hit's, so neither is recycled "
            "before the worker copied it; free still gives the last block first; a sliding-"
            "window manager replaces blocks that left the window with the null block.",
            "add_local_computed_blocks, allocate_new_blocks and _apply_cow in a public "
            "annotated copy of the 0.33-era file",
        ),
    ),
    "kv_cache_utils": Ref(
        "vllm/v1/core/kv_cache_utils.py",
        ("FreeKVCacheBlockQueue", "hash_block_tokens", "KVCacheBlock"),
        "bbf906a88ba1a39104884c88c9811a4f968e4659",
        "FreeKVCacheBlockQueue is a doubly linked list of KVCacheBlocks (remove from the middle "
        "in O(1)), ordered by block id at start; hash_block_tokens hashes a full block's tokens "
        "with its parent's hash and extra keys (LoRA id, multimodal inputs, cache salt). "
        "(prepend_n, which block_pool calls, came with the split, PR 42656, after this commit.)",
        repin=Repin(
            ("KVCacheBlockCopy",),
            "KVCacheBlockCopy(src_block_id, dst_block_id) is one block copy the scheduler "
            "hands the worker (the copy-on-write of a partial hit) in its output.",
            "imports of KVCacheBlockCopy from vllm.v1.core.kv_cache_utils in public copies of "
            "vLLM's tests and of kv_cache_manager.take_kv_cache_block_copies",
        ),
    ),
    "kv_cache_manager": Ref(
        "vllm/v1/core/kv_cache_manager.py",
        ("KVCacheManager.allocate_slots", "KVCacheManager.get_computed_blocks"),
        "ace980e6de0540f49b0c63248437a1a7807590c1",
        "allocate_slots gives a request the new blocks its scheduled tokens need (or returns "
        "None: the scheduler preempts); get_computed_blocks finds the longest cached prefix "
        "of full blocks, the last prompt token always computed.",
    ),
    "scheduler": Ref(
        "vllm/v1/core/sched/scheduler.py",
        ("Scheduler.schedule", "Scheduler._preempt_request"),
        "b4622cf924bc72504aed99e486062d6633fde39e",
        "schedule serves running requests first, each its remaining tokens up to the token "
        "budget (decodes 1, prompts a chunk); when allocate_slots fails it preempts "
        "self.running.pop(), the last of running (fcfs; priority: the max of (priority, "
        "arrival)), by recompute, and admits no waiting request in a step that preempted.",
    ),
    "scheduler_config": Ref(
        "vllm/config/scheduler.py",
        ("SchedulerConfig.enable_chunked_prefill", "SchedulerConfig.max_num_batched_tokens"),
        "1f8758d584e8f599219d75adf658e182ed809a43",
        "the field enable_chunked_prefill defaults to True and max_num_batched_tokens to "
        "2048; both docstrings say the real value is set in EngineArgs.create_engine_config. "
        "Encoder-decoder models turn chunked prefill off.",
    ),
    "cache_config": Ref(
        "vllm/config/cache.py",
        ("CacheConfig.enable_prefix_caching", "prefix_caching_hash_algo", "swap_space",
         "kv_offloading_size"),
        "c1d86421174a87056edc90a41dc9942391509e84",
        "enable_prefix_caching is None in the dataclass, documented 'Enabled by default for "
        "V1' (the engine's arguments fill it in); prefix_caching_hash_algo defaults to sha256; "
        "swap_space is 4 GiB per GPU; KV offloading to the CPU is a cache setting "
        "(kv_offloading_size), not a way to preempt.",
        repin=Repin(
            ("CacheConfig.prefix_match_unit", "kv_offloading_size"),
            "prefix_match_unit (default None) is the hash block size, the granularity of "
            "prefix matches; it must divide every KV cache group's block size. Preemption is "
            "by recompute only: there is no swap_space; CPU offloading is for reuse.",
            "the prefix_match_unit docstring as quoted from config/cache.py in public reading "
            "notes; swap_space's removal as reported to pagedlab (its issue 32), not re-read",
        ),
    ),
    "worker_block_table": Ref(
        "vllm/v1/worker/block_table.py",
        ("BlockTable", "BlockTable.compute_slot_mapping", "MultiGroupBlockTable", "CpuGpuBuffer"),
        "a4cd9d0d28bdb41db8dfe0acdafac2bf2f608630",
        "the worker's BlockTable preallocates an int32 [max_num_reqs, max_num_blocks_per_req] "
        "CpuGpuBuffer (max_num_blocks_per_req = cdiv(max_model_len, block_size)): a row per "
        "request slot, used or not; compute_slot_mapping gathers block_table[req, pos // "
        "block_size] * block_size + pos % block_size for every token, in numpy.",
    ),
    "gpu_block_tables": Ref(
        "vllm/v1/worker/gpu/block_table.py",
        ("BlockTables", "_compute_slot_mappings_kernel", "PAD_SLOT_ID"),
        "d29a69a5f9eac41579524a0c22bcd68dd15b9ba7",
        "the new model runner's BlockTables keeps one torch.zeros int32 [max_num_reqs, "
        "cdiv(max_model_len, block_size)] per KV cache group on the GPU; the Triton "
        "_compute_slot_mappings_kernel runs one program per request over its tokens "
        "(query_start_loc, positions) and one more that pads the rest of the "
        "[max_num_batched_tokens] slot mapping with PAD_SLOT_ID (-1, for CUDA graphs).",
    ),
    "attention_utils": Ref(
        "vllm/v1/attention/backends/utils.py",
        ("CommonAttentionMetadata",),
        "a9e3b0a07e039954a9fd1e3def76e0513b8ed4f5",
        "CommonAttentionMetadata carries query_start_loc (batch_size + 1, where each "
        "request's tokens start), seq_lens (computed plus newly scheduled tokens), the "
        "block table tensor and the slot mapping, for every attention backend.",
    ),
    "parallel_sampling": Ref(
        "vllm/v1/engine/parallel_sampling.py",
        ("ParentRequest",),
        "491d923514ad9c40e665dc8deae57dd377cb88b0",
        "a request with n > 1 samples becomes n child requests (ParentRequest), each "
        "scheduled alone; they share the prompt's full blocks through prefix caching.",
    ),
    "triton_unified_attention": Ref(
        "vllm/attention/ops/triton_unified_attention.py",
        ("unified_attention",),
        "1c98a4967619bdc682aaf2f15eec6c3302d64368",
        "one Triton kernel for prefill and decode tokens of a mixed batch, reading K/V block "
        "by block through the block table with online softmax.",
    ),
    "kv_cache_coordinator": Ref(
        "vllm/v1/core/kv_cache_coordinator.py",
        ("KVCacheCoordinator", "scheduler_block_size", "hash_block_size", "remove_skipped_blocks"),
        "00b08dc44519a82cbdd9061d92d1226985094622",
        "one KVCacheCoordinator builds one BlockPool (with the hash block size) for every KV "
        "cache group and one single-type manager per group; the scheduling granularity is a "
        "multiple of every group's block size and of the hash block size; "
        "remove_skipped_blocks replaces blocks no longer needed with the null block.",
    ),
    "async_scheduler": Ref(
        "vllm/v1/core/sched/async_scheduler.py",
        ("AsyncScheduler", "num_output_placeholders", "async_tokens_to_discard"),
        "014b23503270d029739d400ec4c14ba0714bdcd8",
        "AsyncScheduler._update_after_schedule adds output placeholders for every scheduled "
        "decode (num_output_placeholders): the next step is planned before this step's token "
        "exists; _update_request_with_output drops a force-preempted request's stale in-flight "
        "outputs (async_tokens_to_discard) and removes a placeholder per real token.",
        repin=Repin(
            ("AsyncScheduler",),
            "async scheduling is on by default.",
            "as reported to pagedlab (its issue 32) of the 0.33.0 release, not re-read here",
        ),
    ),
    "cache_kernels": Ref(
        "csrc/cache_kernels.cu",
        ("reshape_and_cache", "reshape_and_cache_flash", "swap_blocks"),
        "693083ae80680811c9c2a22edad2568e6635e190",
        "reshape_and_cache(_flash) write each token's K/V at its slot, skipping slot -1; "
        "swap_blocks issues one cudaMemcpyAsync per block.",
        engine="kernel",
    ),
    "attention_kernels": Ref(
        "csrc/attention/attention_kernels.cuh",
        ("paged_attention_kernel", "logits"),
        "5bc0e56c7a30800631543dd1a447e4e44fbd5bba",
        "the original CUDA paged-attention kernel stores every position's score in a "
        "shared-memory array logits (seq_len floats), then runs a separate softmax; v2 splits "
        "long contexts into partitions so the array stays within shared memory.",
        engine="kernel",
    ),
    "v0_scheduler": Ref(
        "vllm/core/scheduler.py",
        ("Scheduler._schedule_default", "_schedule_chunked_prefill", "_get_prompt_limit",
         "PreemptionMode"),
        "0dce2b29aaaa36d3b7e5d80302b1018c1c296eee",
        "V0 admits no prompt while anything is swapped out (if not self.swapped), preempts "
        "by recompute for a single-sequence group and by swap otherwise, and limits a prompt "
        "to min(max_model_len, max_num_batched_tokens) without chunked prefill.",
        engine="V0",
    ),
    "v0_block_manager": Ref(
        "vllm/core/block_manager.py",
        ("SelfAttnBlockSpaceManager.can_allocate",),
        "9a4b60a4c91d972116c01e818048ab8868542d62",
        "can_allocate admits a prompt only if a watermark of free blocks stays free after it.",
        engine="V0",
    ),
    "v0_cache_engine": Ref(
        "vllm/worker/cache_engine.py",
        ("CacheEngine.swap_in", "CacheEngine.swap_out"),
        "60b652b79cabe13e4059b5d5084bfed6eafc3cf1",
        "swap_in / swap_out call swap_blocks once per layer, for K and for V.",
        engine="V0",
    ),
})  # fmt: skip
"""Every vLLM file the notebooks name, by key."""

PULL_REQUESTS: Mapping[int, PullRequest] = MappingProxyType({
    33710: PullRequest(
        33710, "2026-02-03 (opened; closed)", "[Core] Improve KV cache block reuse for prefix "
        "caching",
        "proposed the split: prepend_n, fresh blocks (no hash) to the front of the free queue, "
        "cached blocks to the back (the split PR 48017 credits to PR 42656).",
    ),
    42656: PullRequest(
        42656, "2026-05-14 (opened; merged)", "Apply LRU policy only to proper cache entries",
        "BlockPool.free_blocks splits freed blocks by hash (prepend_n / append_n); before "
        "it, every freed block was appended to the back (PR 48017's description).",
    ),
    48017: PullRequest(
        48017, "2026-07-08", "[Perf][V1] Skip LRU hash-split in free_blocks when prefix "
        "caching is off",
        "with prefix caching off, one pass without the split, but it appended (FIFO) where "
        "the split had prepended (LIFO).",
    ),
    51482: PullRequest(
        51482, "2026-08-08", "[BugFix][Core] free_blocks: restore prepend (LIFO) reuse order "
        "when prefix caching is off",
        "with prefix caching off, every freed block goes to the front again: the order of the "
        "split, in which no block has a hash.",
    ),
})  # fmt: skip
"""The pull requests that date the free rule (their threads give the dates)."""


ISSUES: Mapping[int, PullRequest] = MappingProxyType({
    40696: PullRequest(
        40696, "2026-04-23 (opened)", "[Feature]: Prefix caching completely ineffective for "
        "Mamba-hybrid models (Qwen3.5) when prompt < block_size (528 tokens)",
        "vLLM 0.19.1 set the attention block to 528 tokens; prompts shorter than it hit 0 %.",
    ),
    48401: PullRequest(
        48401, "2026-07-12 (opened)", "[Bug]: Prefix caching silently inert on hybrid Mamba2 "
        "models when max_model_len < auto-selected block size",
        "NemotronH got blocks of 8,320 tokens: 0 hits of 10,608 queries at max_model_len 4,096.",
    ),
    54607: PullRequest(
        54607, "(thread not read)", "why the prefix cache hits 0 % below one block",
        "reported to pagedlab (its issue 32) for blocks of 528, 784, 3,584, 7,808 and 8,320 "
        "tokens; the thread was not read.",
    ),
})  # fmt: skip
"""vLLM issues notebook 11 cites for what users report (not behaviour pins)."""


@dataclass(frozen=True)
class HFRef:
    """One file of Hugging Face ``transformers``' continuous-batching engine, as installed."""

    path: str  # under transformers/generation/continuous_batching/
    names: tuple[str, ...]
    read: str
    version: str = HF_VERSION


HF_REFS: Mapping[str, HFRef] = MappingProxyType({
    "hf_cache": HFRef(
        "cache.py",
        ("PagedAttentionCache", "can_store_request_tokens", "free_blocks"),
        "PagedAttentionCache gives each attention type a cache allocator and sizes sectors as "
        "the LCM of their block bytes (and 128): 1 sector = 3 full-attention blocks = 1 "
        "sliding block in its own worked example; the cache tensor starts with two trash "
        "sectors, never allocated (padding tokens read and write there).",
    ),
    "hf_cache_pool": HFRef(
        "cache_allocators/cache_pool.py",
        ("CachePool", "RegularTrees", "allocate_sector", "try_to_free_sectors"),
        "CachePool.allocate_sector pops the last free sector (free_sectors.pop(): the top id "
        "first) and makes it a tree of leaves (blocks); get_free_blocks pops leaves tree by "
        "tree in insertion order, each tree from its end; freed blocks rejoin their tree, and "
        "try_to_free_sectors appends wholly free sectors to the sector list.",
    ),
    "hf_full_attention": HFRef(
        "cache_allocators/full_attention.py",
        ("FullAttentionCacheAllocator", "allocate_cache_to_request"),
        "allocate_cache_to_request extends a request's block table with the pool's free blocks "
        "it needs (ceil(length / page_size) in all).",
    ),
    "hf_scheduler": HFRef(
        "scheduler.py",
        ("_try_to_meet_safety_margin",),
        "every batch's scheduling starts with _try_to_meet_safety_margin, which calls "
        "try_to_free_sectors (and evicts cached blocks below the safety margin).",
    ),
    "hf_offloading": HFRef(
        "offloading_manager.py",
        ("CachePool",),
        "a second CachePool on the CPU (no trash sectors) to which requests' blocks are "
        "offloaded: swapping lives on in Hugging Face's engine.",
    ),
})  # fmt: skip
"""Hugging Face's engine, read in the installed ``transformers`` 5.24.0."""


def ref(key: str) -> Ref:
    """The entry ``key`` of :data:`REFS`; KeyError names the keys there are."""
    try:
        return REFS[key]
    except KeyError:
        raise KeyError(f"no vLLM reference {key!r}; there are {sorted(REFS)}") from None


def as_of(key: str) -> str:
    """The words a notebook puts beside an engine claim: ``path`` as of its newest pin
    (vLLM 0.33.0 where the file was re-pinned, else the commit it was read at)."""
    r = ref(key)
    if r.repin:
        return f"`{r.path}` as of vLLM {r.repin.release} (`{r.repin.short}`)"
    return f"`{r.path}` as of vLLM `{r.short}`"


def statement(key: str) -> str:
    """What ``key``'s file does, as of each pin: one line per pin, each starting "As of"."""
    r = ref(key)
    lines = [f"As of vLLM `{r.short}`, `{r.path}`: {r.read}"]
    if r.repin:
        lines.append(
            f"As of vLLM {r.repin.release} (`{r.repin.short}`), `{r.path}`: {r.repin.read} "
            f"(read: {r.repin.source})"
        )
    return "\n".join(lines)


def hf_statement(key: str) -> str:
    """What one Hugging Face file does, as of the transformers version read."""
    h = HF_REFS[key]
    return f"As of transformers {h.version}, `{h.path}`: {h.read}"


def table() -> str:
    """Every entry as one markdown table (file, what is cited, commit, what it does)."""
    lines = [
        "| file | cited | commit | engine | what the code does there |",
        "|---|---|---|---|---|",
    ]
    for r in REFS.values():
        names = ", ".join(f"`{n}`" for n in r.names)
        lines.append(
            f"| `{r.path}` | {names} | `{r.short}` | {r.engine} | as of `{r.short}`: {r.read} |"
        )
        if r.repin:
            names = ", ".join(f"`{n}`" for n in r.repin.names)
            lines.append(
                f"| `{r.path}` | {names} | `{r.repin.short}` | {r.engine} | as of "
                f"{r.repin.release}: {r.repin.read} |"
            )
    lines += ["", "| PR | merged | title | what it changed |", "|---|---|---|---|"]
    for p in PULL_REQUESTS.values():
        lines.append(f"| #{p.number} | {p.date} | {p.title} | {p.change} |")
    return "\n".join(lines)
