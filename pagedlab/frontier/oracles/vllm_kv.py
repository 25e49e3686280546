"""vLLM 0.34.0's own ``KVCacheManager`` (and its ``BlockPool``) on a pagedlab trace.

What is vLLM's and what is the driver's, as read in the 0.34.0 wheel:

- one full-attention KV cache group (``KVCacheConfig`` with one ``FullAttentionSpec``), prefix
  caching on, sha256 block hashes (``init_none_hash``, ``get_request_block_hasher``);
- an admission is the scheduler's two calls, ``get_computed_blocks`` (the hit) then
  ``allocate_slots`` (``None``: refused, nothing changed), after which the driver sets
  ``num_computed_tokens`` as ``update_from_output`` would; a grow appends the sampled tokens
  (``append_output_token_ids``: new full blocks get their hashes) and calls ``allocate_slots``;
- a preemption is ``_preempt_request``'s part on the manager (``vllm/v1/core/sched/
  scheduler.py``: ``free``, ``num_computed_tokens = 0``, status ``PREEMPTED``), a resume a new
  lookup on all the request's tokens; a free is ``KVCacheManager.free`` (tail block first);
- evictions are counted from the pool's own ``BlockRemoved`` events (``enable_kv_cache_events``).

vLLM is imported inside :func:`run_vllm` (:class:`~pagedlab.frontier.oracles.EngineMissing` if
absent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedlab.frontier.oracles import require_vllm
from pagedlab.frontier.oracles.trace import Op, Recorder, Run, applies, check_trace
from pagedlab.ground.checks import check_int


def kv_cache_manager(num_blocks: int, block_size: int, enable_caching: bool = True) -> Any:
    """A real vLLM 0.34 ``KVCacheManager``: ``num_blocks`` blocks (block 0 its null block) of
    ``block_size`` tokens, one full-attention group, prefix caching on (or off), events on."""
    require_vllm()
    import torch
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import init_none_hash
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    num_blocks = check_int(num_blocks, "num_blocks", minimum=2)
    block_size = check_int(block_size, "block_size", minimum=1)
    init_none_hash(sha256)
    spec = FullAttentionSpec(
        block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    config = KVCacheConfig(
        num_blocks=num_blocks, kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layers.0.attn"], spec)],
    )  # fmt: skip
    return KVCacheManager(
        config, max_model_len=1 << 16, scheduler_block_size=block_size,
        hash_block_size=block_size, enable_caching=enable_caching, enable_kv_cache_events=True,
    )  # fmt: skip


def new_request(rid: str, tokens: Sequence[int], block_size: int) -> Any:
    """A vLLM ``Request`` with sha256 block hashes at ``block_size`` (as the engine makes one)."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    hasher = get_request_block_hasher(block_size, sha256)
    return Request(rid, list(tokens), SamplingParams(max_tokens=1 << 20), None, block_hasher=hasher)


def admit(manager: Any, request: Any) -> int | None:
    """The scheduler's admission of ``request`` on ``manager``: the hit (tokens), or None if
    ``allocate_slots`` refused it (nothing changed)."""
    from vllm.v1.request import RequestStatus

    blocks, hit, _ = manager.get_computed_blocks(request)
    if manager.allocate_slots(request, request.num_tokens - hit, hit, blocks) is None:
        return None
    request.num_computed_tokens = request.num_tokens
    request.status = RequestStatus.RUNNING
    return int(hit)


def run_vllm(
    trace: Sequence[Sequence[Op]], num_blocks: int, block_size: int, enable_caching: bool = True
) -> Run:
    """The trace on vLLM 0.34's real ``KVCacheManager``; the same record as
    :func:`~pagedlab.frontier.oracles.trace.run_pagedlab_vllm_rule` (``enable_caching=False``: as
    ``pagedlab.frontier.peers.run_trace("vllm")``, no prefix cache)."""
    from vllm.distributed.kv_events import BlockRemoved
    from vllm.v1.request import RequestStatus

    steps = check_trace(trace)
    manager = kv_cache_manager(num_blocks, block_size, enable_caching)
    requests: dict[str, Any] = {}
    live: set[str] = set()
    evictions = 0
    rec = Recorder("vLLM 0.34.0 KVCacheManager")

    def preempt(request: Any) -> None:  # Scheduler._preempt_request, its KV cache part
        manager.free(request)
        request.num_computed_tokens = 0
        request.status = RequestStatus.PREEMPTED
        live.discard(request.request_id)
        rec.preempted.append(request.request_id)

    for step in steps:
        for op in step:
            kind, rid = op[0], op[1]
            if not applies(kind, rid, live, set(requests) - live):
                continue
            if kind in ("admit", "resume"):
                if kind == "admit":
                    requests[rid] = new_request(rid, op[2], block_size)  # type: ignore[misc]
                hit = admit(manager, requests[rid])
                if hit is None:
                    rec.refused.append(rid)
                    if kind == "admit":
                        del requests[rid]
                else:
                    live.add(rid)
                    rec.hits[rid] = hit
            elif kind == "grow":
                request = requests[rid]
                request.append_output_token_ids(list(op[2]))  # type: ignore[misc]
                new = request.num_tokens - request.num_computed_tokens
                if manager.allocate_slots(request, new) is None:
                    preempt(request)
                else:
                    request.num_computed_tokens = request.num_tokens
            elif kind == "preempt":
                preempt(requests[rid])
            else:
                manager.free(requests.pop(rid))
                live.discard(rid)
        for event in manager.take_events():
            if isinstance(event, BlockRemoved):
                evictions += len(event.block_hashes)
        rec.end_step({r: tuple(manager.get_block_ids(r)[0]) for r in live}, evictions)
    return rec.run()
