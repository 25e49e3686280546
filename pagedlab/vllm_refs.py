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

This module imports nothing from pagedlab (every layer may import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Ref:
    """One vLLM file as read at ``commit``: what the notebooks cite of it, and what it does."""

    path: str
    names: tuple[str, ...]  # functions, classes or settings the notebooks name
    commit: str  # 40 hex digits
    read: str  # what the code at that commit does, as the notebooks rely on it
    engine: str = "V1"  # V1 (today's engine), V0 (removed), kernel (csrc, both engines)

    @property
    def short(self) -> str:
        return self.commit[:7]


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
    ),
    "single_type_kv_cache_manager": Ref(
        "vllm/v1/core/single_type_kv_cache_manager.py",
        ("SingleTypeKVCacheManager.free",),
        "129ab7c60cbb8eb11e875373e67f7e521b74aa30",
        "free passes a finished request's blocks to BlockPool.free_blocks in reverse "
        "(reversed(req_blocks)): its last block first.",
    ),
    "kv_cache_utils": Ref(
        "vllm/v1/core/kv_cache_utils.py",
        ("FreeKVCacheBlockQueue", "hash_block_tokens", "KVCacheBlock"),
        "bbf906a88ba1a39104884c88c9811a4f968e4659",
        "FreeKVCacheBlockQueue is a doubly linked list of KVCacheBlocks (remove from the middle "
        "in O(1)), ordered by block id at start; hash_block_tokens hashes a full block's tokens "
        "with its parent's hash and extra keys (LoRA id, multimodal inputs, cache salt). "
        "(prepend_n, which block_pool calls, came with the split, PR 42656, after this commit.)",
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
        42656, "before 2026-07-08", "the free_blocks split (thread not read; PR 48017 dates it)",
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


def ref(key: str) -> Ref:
    """The entry ``key`` of :data:`REFS`; KeyError names the keys there are."""
    try:
        return REFS[key]
    except KeyError:
        raise KeyError(f"no vLLM reference {key!r}; there are {sorted(REFS)}") from None


def as_of(key: str) -> str:
    """The words a notebook puts beside an engine claim: ``path`` as of vLLM ``abc1234``."""
    r = ref(key)
    return f"`{r.path}` as of vLLM `{r.short}`"


def table() -> str:
    """Every entry as one markdown table (file, what is cited, commit, what it does)."""
    lines = [
        "| file | cited | commit | engine | what the code does there |",
        "|---|---|---|---|---|",
    ]
    for r in REFS.values():
        names = ", ".join(f"`{n}`" for n in r.names)
        lines.append(f"| `{r.path}` | {names} | `{r.short}` | {r.engine} | {r.read} |")
    lines += ["", "| PR | merged | title | what it changed |", "|---|---|---|---|"]
    for p in PULL_REQUESTS.values():
        lines.append(f"| #{p.number} | {p.date} | {p.title} | {p.change} |")
    return "\n".join(lines)
