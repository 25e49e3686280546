"""A trace of requests over steps, what a run of it returns, and pagedlab's replicas run on it.

A trace is a tuple of steps; a step a tuple of operations, done in order: ``("admit", rid,
tokens)`` (a prefix-cache lookup, then slots for the rest; refused, nothing changed, if they do
not fit); ``("grow", rid, tokens)`` (a decode; if the slots do not fit the request is preempted,
as vLLM's scheduler does when ``allocate_slots`` fails, keeping its tokens); ``("preempt", rid)``
(blocks freed, tokens kept: ``Scheduler._preempt_request``); ``("resume", rid)`` (admitted again
on all its tokens); ``("free", rid)`` (finished; blocks freed, last block first). An operation
that does not apply is skipped by every driver alike, so any random list of operations is a
trace. A :class:`Run` records after each step every live request's block ids, the tokens each
admission found cached, refusals, preemptions, and evictions so far.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from pagedlab.frontier.peers import HFCachePool, vllm_block_pool
from pagedlab.ground.checks import ceil_div, check_int
from pagedlab.memory.allocator import OutOfBlocksError
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import PrefixCache

Op = tuple[str, str] | tuple[str, str, tuple[int, ...]]
Trace = tuple[tuple[Op, ...], ...]
KINDS = ("admit", "grow", "preempt", "resume", "free")


@dataclass(frozen=True)
class Step:
    """What one step left: blocks per live request, hit tokens per admission, and what failed."""

    blocks: dict[str, tuple[int, ...]]
    hits: dict[str, int] = field(default_factory=dict)
    refused: tuple[str, ...] = ()
    preempted: tuple[str, ...] = ()
    evictions: int = 0


@dataclass(frozen=True)
class Run:
    """One engine's (or replica's) record of a trace, step by step."""

    engine: str
    steps: tuple[Step, ...]


class Recorder:
    """Collects one step's outcome; each driver calls it as its engine answers."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.steps: list[Step] = []
        self.hits: dict[str, int] = {}
        self.refused: list[str] = []
        self.preempted: list[str] = []

    def end_step(self, blocks: dict[str, tuple[int, ...]], evictions: int) -> None:
        self.steps.append(
            Step(dict(sorted(blocks.items())), self.hits, tuple(self.refused),
                 tuple(self.preempted), evictions)
        )  # fmt: skip
        self.hits, self.refused, self.preempted = {}, [], []

    def run(self) -> Run:
        return Run(self.engine, tuple(self.steps))


def applies(kind: str, rid: str, running: Collection[str], preempted: Collection[str]) -> bool:
    """Whether operation ``kind`` on ``rid`` applies now (else every driver skips it)."""
    if kind == "admit":
        return rid not in running and rid not in preempted
    return rid in preempted if kind == "resume" else rid in running


def check_trace(trace: object) -> Trace:
    """The trace as tuples; ValueError naming the first bad operation (nothing is run)."""
    if not isinstance(trace, Sequence):
        raise TypeError(f"trace must be a sequence of steps, got {trace!r}")
    steps = []
    for step in trace:
        ops: list[Op] = []
        for op in step:
            if not isinstance(op, tuple) or not op or op[0] not in KINDS or len(op) < 2:
                raise ValueError(f"an operation must be (kind in {KINDS}, rid, ...), got {op!r}")
            if op[0] in ("admit", "grow"):
                tokens = tuple(check_int(t, "token id", minimum=0) for t in op[2])
                if not tokens:
                    raise ValueError(f"{op[0]} of {op[1]!r} needs at least one token")
                ops.append((op[0], op[1], tokens))
            else:
                ops.append((op[0], op[1]))
        steps.append(tuple(ops))
    return tuple(steps)


def run_pagedlab_vllm_rule(trace: Sequence[Sequence[Op]], num_blocks: int, block_size: int) -> Run:
    """The trace on pagedlab's replica of vLLM: ``vllm_block_pool`` (``free_rule="vllm-v1"``,
    block 0 held as the null block) under a :class:`PrefixCache`."""
    pool = vllm_block_pool(num_blocks, block_size)
    cache = PrefixCache(pool)
    tables: dict[str, BlockTable] = {}
    tokens: dict[str, list[int]] = {}
    rec = Recorder("pagedlab vllm-v1")
    for step in check_trace(trace):
        for op in step:
            kind, rid = op[0], op[1]
            if not applies(kind, rid, tables, set(tokens) - set(tables)):
                continue
            if kind in ("admit", "resume"):
                ids = list(op[2]) if kind == "admit" else tokens[rid]  # type: ignore[misc]
                try:
                    admission = cache.admit(ids)
                except OutOfBlocksError:
                    rec.refused.append(rid)
                    continue
                tables[rid], tokens[rid] = admission.table, ids
                rec.hits[rid] = admission.hit_tokens
            elif kind == "grow":
                tokens[rid] += op[2]  # type: ignore[misc]
                try:
                    tables[rid].append_tokens(len(op[2]))  # type: ignore[misc]
                except OutOfBlocksError:
                    tables.pop(rid).free()
                    rec.preempted.append(rid)
                    continue
                cache.register(tables[rid], tokens[rid])
            else:
                tables.pop(rid).free()
                if kind == "preempt":
                    rec.preempted.append(rid)
                else:
                    del tokens[rid]
        rec.end_step({r: tuple(t.blocks) for r, t in tables.items()}, cache.stats.evictions)
    cache.close()
    return rec.run()


def run_pagedlab_hf_rule(
    trace: Sequence[Sequence[Op]], num_sectors: int, block_size: int, blocks_per_sector: int = 1
) -> Run:
    """The trace (admit / grow / free; no prefix sharing) on :class:`HFCachePool`;
    ``try_to_free_sectors`` at the start of each step, as transformers' scheduler does
    before each batch. A grow that does not fit is refused (nothing changed): transformers
    starves the request instead of preempting it."""
    pool = HFCachePool(num_sectors, blocks_per_sector)
    lengths: dict[str, int] = {}
    rec = Recorder("pagedlab HFCachePool")
    for step in check_trace(trace):
        pool.try_to_free_sectors()
        for op in step:
            kind, rid = op[0], op[1]
            if not applies(kind, rid, lengths, set()):
                continue
            if kind == "free":
                pool.free(rid)
                del lengths[rid]
                continue
            if kind not in ("admit", "grow"):
                raise ValueError(f"the Hugging Face rule has no {kind!r}")
            have = lengths.get(rid, 0)
            need = ceil_div(have + len(op[2]), block_size) - ceil_div(have, block_size)  # type: ignore[misc]
            try:
                if need:
                    pool.allocate(rid, need)
                else:
                    pool.tables.setdefault(rid, [])
            except OutOfBlocksError:
                rec.refused.append(rid)
                continue
            lengths[rid] = have + len(op[2])  # type: ignore[misc]
            if kind == "admit":
                rec.hits[rid] = 0
        rec.end_step({r: tuple(b) for r, b in pool.tables.items()}, 0)
    return rec.run()


def takes(trace: Sequence[tuple[str, str, int]]) -> Trace:
    """``pagedlab.frontier.peers``' ("take" | "free", name, tokens) trace, each a step of its own,
    every take a prompt of distinct tokens (no two requests share a block's content)."""
    steps: list[tuple[Op, ...]] = []
    for i, (op, name, n) in enumerate(trace):
        tokens = tuple(range(1000 * i, 1000 * i + n))
        steps.append((("admit", name, tokens),) if op == "take" else (("free", name),))
    return check_trace(steps)


def prompt_steps(steps: Sequence[Sequence[tuple[str, Sequence[int]]]]) -> Trace:
    """Steps of (name, prompt) as :class:`~pagedlab.frontier.miss_reasons.MissClassifier` runs
    them: every prompt admitted in order, then all of them freed at the step's end."""
    return check_trace(
        [tuple([("admit", n, tuple(ids)) for n, ids in s] + [("free", n) for n, _ in s])
         for s in steps]
    )  # fmt: skip
