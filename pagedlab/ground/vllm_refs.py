"""Every vLLM file, function and PR a notebook names, once, with where its text was read.

A file's behaviour is only true *as of* a version. A :class:`Ref` is one vLLM file, the names the
notebooks cite from it and what that code does. V1 files are read in the vLLM 0.34.0 wheel
(:data:`VLLM_RELEASE`, the Python core pagedlab installs; ``pagedlab.frontier.oracles`` runs its
``KVCacheManager``) at :attr:`Ref.lines`; :attr:`Ref.first_read` keeps an older commit a notebook
may still date a statement by. Files outside the wheel (the V0 engine, ``csrc/``, V1 files gone by
0.34) are pinned to :attr:`Ref.commit`. Each PR or issue title was checked against its thread;
Hugging Face's engine is read in ``transformers`` 5.24.0 (:data:`HF_REFS`, each file and name
checked by the tests). This module imports nothing from pagedlab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

VLLM_RELEASE = "0.34.0"
VLLM_COMMIT = "62d4bc3"  # the release's commit (the wheel's vllm/_version.py: g62d4bc3c7)
HF_VERSION = "5.24.0"
ENGINES = ("V1", "V0", "kernel", "gone")  # read in the wheel | removed engine | csrc | gone by 0.34


@dataclass(frozen=True)
class Ref:
    """One vLLM file: what the notebooks cite of it, what it does, and where that was read."""

    path: str
    names: tuple[str, ...]  # functions, classes or settings the notebooks name
    read: str  # what the code does, as the notebooks rely on it
    lines: str = ""  # V1: the lines of the 0.34.0 wheel's file that say it, e.g. "162-163, 824"
    engine: str = "V1"
    commit: str = ""  # not in the wheel: the commit (40 hex) the text was read at
    first_read: str = ""  # V1: an older commit (40 hex) notebooks may still date by

    @property
    def short(self) -> str:
        """``0.34.0`` for a file read in the wheel, else the short commit."""
        return self.commit[:7] if self.commit else VLLM_RELEASE

    @property
    def shorts(self) -> tuple[str, ...]:
        """Every short commit a notebook may date this file by."""
        return tuple(c[:7] for c in (self.commit, self.first_read) if c)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.lines}" if self.lines else self.path


@dataclass(frozen=True)
class PullRequest:
    """A vLLM pull request or issue the notebooks cite, its title as its thread gives it."""

    number: int
    date: str  # YYYY-MM-DD, from the thread
    title: str
    change: str


REFS: Mapping[str, Ref] = MappingProxyType({
    "block_pool": Ref(
        "vllm/v1/core/block_pool.py",
        ("BlockPool", "BlockPool.free_blocks", "BlockPool.get_new_blocks", "null_block",
         "cache_full_blocks", "BlockHashToBlockMap", "evict_first"),
        "__init__ pops block 0 off the free queue as the null block (never freed or cached); "
        "free_blocks puts a freed block without a hash at the front of the free queue "
        "(prepend_n: reused first) and a hashed one at the back (append_n), each group in the "
        "order given, and with evict_first=True hashed ones at the front too (for blocks a CPU "
        "tier already holds); get_new_blocks pops from the front and evicts a popped block's "
        "hash. Only full blocks get a hash, and duplicates are kept: a block whose hash is "
        "already cached is cached too (block tables stay append-only).",
        "47-51, 78-82, 162-163, 681-722, 798-837",
        first_read="c59cb7941357443da7c5eef75cfa8697d683d228",
    ),
    "single_type_kv_cache_manager": Ref(
        "vllm/v1/core/single_type_kv_cache_manager.py",
        ("SingleTypeKVCacheManager.free", "_apply_cow", "SlidingWindowManager",
         "remove_skipped_blocks"),
        "free passes a request's blocks to BlockPool.free_blocks in reverse: its last block "
        "first. _apply_cow redirects a partial prefix-cache hit (hybrid models only) to a "
        "private copy: the copy replaces the shared block in the request's table, (source, "
        "copy) is queued for the worker, and the copy takes one extra reference, so neither "
        "end is recycled before the copy ran. remove_skipped_blocks frees blocks a sliding "
        "window left and puts the null block in their place.",
        "460-480, 596-604, 666-695, 951",
        first_read="129ab7c60cbb8eb11e875373e67f7e521b74aa30",
    ),
    "kv_cache_utils": Ref(
        "vllm/v1/core/kv_cache_utils.py",
        ("FreeKVCacheBlockQueue", "hash_block_tokens", "KVCacheBlockCopy",
         "partial_hash_hits_enabled", "get_request_block_hasher"),
        "FreeKVCacheBlockQueue is a doubly linked list of KVCacheBlocks (remove from the middle "
        "in O(1)) with prepend_n and append_n; hash_block_tokens hashes a full block's tokens "
        "with its parent's hash and extra keys; partial_hash_hits_enabled is true only if a "
        "group is a Mamba spec in 'align' mode with blocks larger than the hash block size; "
        "KVCacheBlockCopy(src_block_id, dst_block_id) is one copy handed to the worker.",
        "249-251, 254, 434-453, 703, 758-797, 949",
        first_read="bbf906a88ba1a39104884c88c9811a4f968e4659",
    ),
    "kv_cache_manager": Ref(
        "vllm/v1/core/kv_cache_manager.py",
        ("KVCacheManager.allocate_slots", "KVCacheManager.get_computed_blocks"),
        "get_computed_blocks finds the longest cached prefix, at most prompt length - 1 "
        "tokens (the last token is always computed, which can recompute a whole block); "
        "allocate_slots gives a request the blocks its scheduled tokens need, or None (the "
        "scheduler preempts), and caches the request's full blocks at once, when they are "
        "scheduled: a request admitted later in the same step hits them.",
        "288-350, 401-648",
        first_read="ace980e6de0540f49b0c63248437a1a7807590c1",
    ),
    "kv_cache_coordinator": Ref(
        "vllm/v1/core/kv_cache_coordinator.py",
        ("KVCacheCoordinator", "UnitaryKVCacheCoordinator", "HybridKVCacheCoordinator",
         "enable_partial_hash_hits", "remove_skipped_blocks"),
        "one coordinator serves every KV cache group from one BlockPool; a model with one "
        "group gets UnitaryKVCacheCoordinator, which asserts hash_block_size == block_size "
        "(full-block hits only); HybridKVCacheCoordinator enables partial hits only where "
        "partial_hash_hits_enabled says so (a Mamba 'align' group); enable_partial_hash_hits "
        "is False on the base class.",
        "89-92, 433, 530-575, 617-702, 990-1052",
        first_read="00b08dc44519a82cbdd9061d92d1226985094622",
    ),
    "kv_cache_planning": Ref(
        "vllm/v1/core/kv_cache_planning.py",
        ("_get_kv_cache_groups_uniform_page_size",),
        "layers of each attention type are split into groups of one size: the fewest layers of "
        "a type (the most, if under 1.5 times the fewest); each type fills cdiv(count, size) "
        "groups, the last padded (Gemma-3's 52 sliding and 10 full layers: 7 groups of 10).",
        "462, 567-600",
    ),
    "scheduler": Ref(
        "vllm/v1/core/sched/scheduler.py",
        ("Scheduler.schedule", "Scheduler._preempt_request", "cache_aware_window",
         "update_from_output"),
        "when allocate_slots fails, schedule preempts self.running.pop() (fcfs; the lowest "
        "priority under priority) by recompute, and admits no waiting request in a step that "
        "preempted; _preempt_request frees the request's blocks, sets num_computed_tokens to 0 "
        "and marks its in-flight output stale, which update_from_output still appends unless "
        "drop_stale_output was set (reset_prefix_cache, a KV connector's pending hand-off); "
        "cache-aware admission applies only under fcfs with prefix caching.",
        "351, 429-437, 738, 770-785, 950-992, 1065-1066, 1853-1897, 2355-2385, 3335-3344",
        first_read="b4622cf924bc72504aed99e486062d6633fde39e",
    ),
    "scheduler_output": Ref(
        "vllm/v1/core/sched/output.py",
        ("SchedulerOutput", "NewRequestData", "block_ids"),
        "each step's SchedulerOutput carries, for every newly scheduled request, its block_ids "
        "(one list per KV cache group) to the workers.",
        "41-47, 220",
    ),
    "scheduler_config": Ref(
        "vllm/config/scheduler.py",
        ("SchedulerConfig.enable_chunked_prefill", "SchedulerConfig.max_num_batched_tokens",
         "cache_aware_admission_window", "async_scheduling"),
        "enable_chunked_prefill defaults to True and max_num_batched_tokens to 2048; "
        "cache_aware_admission_window (default 0: arrival order) lets waiting requests whose "
        "prefix is cached go first within the first N, once KV cache usage reaches "
        "cache_aware_admission_threshold (0.5); async_scheduling defaults to None (decided "
        "in vllm/config/vllm.py).",
        "40, 47, 90, 146, 223-244, 246",
        first_read="1f8758d584e8f599219d75adf658e182ed809a43",
    ),
    "cache_config": Ref(
        "vllm/config/cache.py",
        ("CacheConfig.DEFAULT_BLOCK_SIZE", "CacheConfig.enable_prefix_caching",
         "prefix_caching_hash_algo", "prefix_match_unit", "enable_extensible_kv_cache",
         "gpu_memory_utilization", "kv_offloading_size"),
        "DEFAULT_BLOCK_SIZE is 64, applied when the user gives no block size; "
        "enable_prefix_caching defaults to True and prefix_caching_hash_algo to sha256; "
        "prefix_match_unit (None) is the hash block size; enable_extensible_kv_cache (on by "
        "default on CUDA and ROCm) reserves the cache's address range and commits physical "
        "pages after warm-up, sizing the cache from memory actually free, and then "
        "gpu_memory_utilization defaults to 1.0 (else 0.92). There is no swap_space: "
        "CPU offloading (kv_offloading_size) is for reuse.",
        "185, 202-234, 267, 269, 395-416, 481-500",
        first_read="c1d86421174a87056edc90a41dc9942391509e84",
    ),
    "vllm_config": Ref(
        "vllm/config/vllm.py",
        ("VllmConfig", "async_scheduling"),
        "async_scheduling left unset is turned on unless the model is a pooling model, the "
        "executor does not support it, or ROCm DeepEP high-throughput DBO is in use.",
        "1610-1637",
    ),
    "platform_interface": Ref(
        "vllm/platforms/interface.py",
        ("Platform.update_block_size_for_backend", "_align_hybrid_block_size"),
        "without a user block size, the attention backends' preferred size replaces the 64 "
        "default; for hybrid models the attention block is then raised to "
        "kernel_block_alignment_size * cdiv(mamba_page_size, kernel_block_alignment_size * "
        "attn_page_size_1_token) (rounded to every backend's alignment) when larger.",
        "760-797, 950, 1110-1119",
    ),
    "gpu_block_tables": Ref(
        "vllm/v1/worker/gpu/block_table.py",
        ("BlockTables", "_compute_slot_mappings_kernel", "PAD_SLOT_ID"),
        "the model runner's BlockTables keeps per KV cache group an int32 table of "
        "[max_num_reqs, max blocks] on the GPU, gathers the step's rows into zero-initialised "
        "input tables (gather_block_tables), and a [max_num_batched_tokens] slot mapping that "
        "the Triton _compute_slot_mappings_kernel fills, the rest padded with PAD_SLOT_ID (-1).",
        "17-94, 160-211, 257-266, 334",
        first_read="d29a69a5f9eac41579524a0c22bcd68dd15b9ba7",
    ),
    "attention_backend": Ref(
        "vllm/v1/attention/backend.py",
        ("CommonAttentionMetadata",),
        "CommonAttentionMetadata carries query_start_loc (batch_size + 1, where each "
        "request's tokens start), seq_lens, the block table tensor and the slot mapping, for "
        "every attention backend.",
        "393-420",
    ),
    "parallel_sampling": Ref(
        "vllm/v1/engine/parallel_sampling.py",
        ("ParentRequest",),
        "a request with n > 1 samples becomes n child requests (ParentRequest), each "
        "scheduled alone; they share the prompt's full blocks through prefix caching.",
        "13-30",
        first_read="491d923514ad9c40e665dc8deae57dd377cb88b0",
    ),
    "gumbel_sampling": Ref(
        "vllm/v1/worker/gpu/sample/gumbel.py",
        ("murmur3_hash32", "gumbel_noised_argmax"),
        "the GPU sampler's Gumbel-max noise is a hash of (seed, position, token): the noise a "
        "seeded request draws does not depend on its batch (its logits still may).",
        "105, 172",
    ),
    "batch_invariant": Ref(
        "vllm/model_executor/determinism/batch_invariant.py",
        ("init_batch_invariance", "matmul_persistent"),
        "VLLM_BATCH_INVARIANT=1: fixed-tile products (Ampere, ROCm), else cuBLAS with split-K off.",
        "284-340, 1387-1421, 1516-1519",
    ),
    "beam_search_offline": Ref(
        "vllm/entrypoints/generate/beam_search/offline.py",
        ("BeamSearchOfflineMixin.beam_search",),
        "offline beam search submits, at every step, one request per beam with max_tokens=1 "
        "and 2 * beam_width logprobs.",
        "60, 115-117",
    ),
    "triton_unified_attention": Ref(
        "vllm/v1/attention/ops/triton_unified_attention.py",
        ("unified_attention",),
        "one Triton kernel for prefill and decode tokens of a mixed batch, reading K/V block "
        "by block through the block table with online softmax.",
        "942",
    ),
    "async_scheduler": Ref(
        "vllm/v1/core/sched/async_scheduler.py",
        ("AsyncScheduler", "num_output_placeholders"),
        "AsyncScheduler._update_after_schedule adds an output placeholder per scheduled decode "
        "(num_output_placeholders): the next step is planned before this step's token exists.",
        "10, 18-41",
        first_read="014b23503270d029739d400ec4c14ba0714bdcd8",
    ),
    "worker_block_table": Ref(
        "vllm/v1/worker/block_table.py",
        ("BlockTable", "BlockTable.compute_slot_mapping", "MultiGroupBlockTable"),
        "gone by 0.34.0 (Model Runner V1 removed). As read at its commit: an int32 "
        "[max_num_reqs, max_num_blocks_per_req] table per group, compute_slot_mapping in numpy.",
        engine="gone",
        commit="a4cd9d0d28bdb41db8dfe0acdafac2bf2f608630",
    ),
    "cache_kernels": Ref(
        "csrc/cache_kernels.cu",
        ("reshape_and_cache", "reshape_and_cache_flash", "swap_blocks"),
        "reshape_and_cache(_flash) write each token's K/V at its slot, skipping slot -1; "
        "swap_blocks issues one cudaMemcpyAsync per block.",
        engine="kernel",
        commit="693083ae80680811c9c2a22edad2568e6635e190",
    ),
    "attention_kernels": Ref(
        "csrc/attention/attention_kernels.cuh",
        ("paged_attention_kernel", "logits"),
        "the original CUDA paged-attention kernel stores every position's score in a "
        "shared-memory array logits (seq_len floats), then runs a separate softmax; v2 splits "
        "long contexts into partitions so the array stays within shared memory.",
        engine="kernel",
        commit="5bc0e56c7a30800631543dd1a447e4e44fbd5bba",
    ),
    "v0_scheduler": Ref(
        "vllm/core/scheduler.py",
        ("Scheduler._schedule_default", "_schedule_chunked_prefill", "_get_prompt_limit",
         "PreemptionMode"),
        "V0 admits no prompt while anything is swapped out (if not self.swapped), preempts "
        "by recompute for a single-sequence group and by swap otherwise, and limits a prompt "
        "to min(max_model_len, max_num_batched_tokens) without chunked prefill.",
        engine="V0",
        commit="0dce2b29aaaa36d3b7e5d80302b1018c1c296eee",
    ),
    "v0_block_manager": Ref(
        "vllm/core/block_manager.py",
        ("SelfAttnBlockSpaceManager.can_allocate",),
        "can_allocate admits a prompt only if a watermark of free blocks stays free after it.",
        engine="V0",
        commit="9a4b60a4c91d972116c01e818048ab8868542d62",
    ),
    "v0_cache_engine": Ref(
        "vllm/worker/cache_engine.py",
        ("CacheEngine.swap_in", "CacheEngine.swap_out"),
        "swap_in / swap_out call swap_blocks once per layer, for K and for V.",
        engine="V0",
        commit="60b652b79cabe13e4059b5d5084bfed6eafc3cf1",
    ),
})  # fmt: skip

PULL_REQUESTS: Mapping[int, PullRequest] = MappingProxyType({
    33710: PullRequest(
        33710, "2026-02-03 (opened; closed)", "[Core] Improve KV cache block reuse for prefix "
        "caching",
        "proposed the split: prepend_n, fresh blocks (no hash) to the front of the free queue, "
        "cached blocks to the back.",
    ),
    42656: PullRequest(
        42656, "2026-05-14 (opened; merged)", "Apply LRU policy only to proper cache entries",
        "BlockPool.free_blocks splits freed blocks by hash (prepend_n / append_n); before "
        "it, every freed block was appended to the back.",
    ),
    48017: PullRequest(
        48017, "2026-07-08", "[Perf][V1] Skip LRU hash-split in free_blocks when prefix "
        "caching is off",
        "with prefix caching off, one pass without the split, but it appended (FIFO) where "
        "the split had prepended (LIFO).",
    ),
    51482: PullRequest(
        51482, "2026-08-10", "[BugFix][Core] free_blocks: restore prepend (LIFO) reuse order "
        "when prefix caching is off",
        "with prefix caching off, every freed block goes to the front again.",
    ),
    46384: PullRequest(
        46384, "2026-06-22 (opened; merged)", "[2/N][Core] support partial prefix cache hit "
        "for hybrid model",
        "prefix_match_unit, fine-grained lookups and copy-on-write for aligned full-attention "
        "+ Mamba hybrid models.",
    ),
})  # fmt: skip
"""The pull requests the notebooks date a behaviour by (titles as their threads give them)."""


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
    53749: PullRequest(
        53749, "2026-08-25 (opened)", "[Bug]: enable_prefix_caching=True but zero hits for any "
        "shared prefix shorter than one attention block on hybrid checkpoints (2096 / 1920 "
        "tokens), ...",
        "measured cached tokens against the prediction floor(X / block) * block for a shared "
        "prefix of X tokens, at blocks of 2,096 and 1,920.",
    ),
    54607: PullRequest(
        54607, "2026-08-31 (opened; closed)", "[Doc]: --prefix-match-unit and the default match "
        "granularity are undocumented",
        "a 240-token shared prompt on a model whose KV block resolves to 784 tokens: 0 hits.",
    ),
})  # fmt: skip
"""vLLM issues notebook 11 cites for what users measured (not behaviour pins)."""


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
    if key not in REFS:
        raise KeyError(f"no vLLM reference {key!r}; there are {sorted(REFS)}")
    return REFS[key]


def statement(key: str) -> str:
    """What ``key``'s file does, starting "As of"."""
    r = ref(key)
    if r.commit:
        return f"As of vLLM `{r.short}` ({r.engine}, not in the 0.34.0 wheel), `{r.path}`: {r.read}"
    return f"As of vLLM {VLLM_RELEASE}, `{r.where}`: {r.read}"


def hf_statement(key: str) -> str:
    """What one Hugging Face file does, as of the transformers version read."""
    h = HF_REFS[key]
    return f"As of transformers {h.version}, `{h.path}`: {h.read}"


def table() -> str:
    """Every entry as one markdown table (file:lines, what is cited, version, what it does)."""
    lines = [
        "| file | cited | as of | engine | what the code does there |",
        "|---|---|---|---|---|",
    ]
    for r in REFS.values():
        names = ", ".join(f"`{n}`" for n in r.names)
        lines.append(f"| `{r.where}` | {names} | `{r.short}` | {r.engine} | {r.read} |")
    lines += ["", "| PR | date | title | what it changed |", "|---|---|---|---|"]
    for p in PULL_REQUESTS.values():
        lines.append(f"| #{p.number} | {p.date} | {p.title} | {p.change} |")
    return "\n".join(lines)
