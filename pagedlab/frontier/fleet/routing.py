"""Several engines behind one router: block-level engines, their KV events, three routers.

A :class:`BlockEngine` is one engine's control plane (a real :class:`BlockAllocator` under
``"vllm-v1"`` and a :class:`PrefixCache`): it admits a prompt on its cached prefix, holds
prompt + output blocks until the request finishes, and publishes what its cache stored and
evicted during each admission (``PrefixCache.listen``) as :mod:`.events`. Time is a model: one
prefill at a time per engine at ``CostModel``'s throughput (notebook 09), ``decode_s`` per
output token; a request short of blocks waits for the earliest finishers; TTFT proxy =
queueing + prefill. A :class:`Router` sees only events (``index[engine] = {hash}``):
``round-robin``; ``least-loaded`` (fewest blocks held); ``kv-aware``: highest
``overlap_weight * leading cached blocks - load``, i.e. lowest ``overlap_weight * blocks to
prefill + load``. Hazards: another block size publishes hashes the router never computes; lost
``BlockRemoved`` events make ``stale`` routes (fewer blocks found than the index promised).
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pagedlab.frontier.fleet.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    to_int,
)
from pagedlab.ground.checks import check_choice, check_int
from pagedlab.memory.allocator import BlockAllocator, OutOfBlocksError
from pagedlab.memory.block_table import BlockTable, blocks_to_append
from pagedlab.memory.prefix_cache import PrefixCache, block_hashes

POLICIES = ("round-robin", "least-loaded", "kv-aware")
PREFILL_TOKENS_PER_S = 10_000.0  # CostModel's default prefill throughput (notebook 09)
DECODE_S = 0.02  # seconds per output token: an assumption of this model, stated


@dataclass(frozen=True)
class Request:
    name: str
    arrival: float  # seconds
    tokens: tuple[int, ...]
    output_len: int
    tenant: int


def multi_tenant_trace(
    num_requests: int = 160,
    tenants: int = 6,
    system_tokens: int = 256,
    user_tokens: tuple[int, int] = (16, 96),
    output_tokens: tuple[int, int] = (16, 64),
    rate: float = 12.0,
    seed: int = 0,
) -> list[Request]:
    """Poisson arrivals (``rate`` per second), each a tenant's system prompt plus its own turn."""
    check_int(num_requests, "num_requests", minimum=1)
    check_int(tenants, "tenants", minimum=1)
    rng = random.Random(seed)
    systems = [[rng.randrange(1, 50_000) for _ in range(system_tokens)] for _ in range(tenants)]
    trace, now = [], 0.0
    for i in range(num_requests):
        now += rng.expovariate(rate)
        tenant = rng.randrange(tenants)
        user = [rng.randrange(1, 50_000) for _ in range(rng.randint(*user_tokens))]
        out = rng.randint(*output_tokens)
        trace.append(Request(f"r{i}", now, tuple(systems[tenant] + user), out, tenant))
    return trace


@dataclass(frozen=True)
class Served:
    engine: str
    hit_tokens: int
    computed_tokens: int
    ttft: float  # seconds: waiting for the engine and for blocks, then the prefill


class BlockEngine:
    """One engine's allocator and prefix cache, serving requests in time (module doc)."""

    def __init__(self, name: str, num_blocks: int, block_size: int) -> None:
        self.name = name
        self.allocator = BlockAllocator(num_blocks, block_size, free_rule="vllm-v1")
        self.cache = PrefixCache(self.allocator)
        self.running: list[tuple[float, int, BlockTable]] = []  # (finish, order, table)
        self.busy_until = 0.0
        self.outbox: list[KVEvent] = []  # published, not yet read by a router
        self._changed: dict[str, list[str]] = {"stored": [], "evicted": []}  # since published
        self.cache.listen(lambda kind, _, block_hash: self._changed[kind].append(block_hash))

    def advance(self, now: float) -> None:
        """Free the tables of the requests finished by ``now``."""
        while self.running and self.running[0][0] <= now:
            self.running.pop(0)[2].free()

    def load(self) -> int:
        """Blocks held by unfinished requests."""
        return self.allocator.num_blocks - self.allocator.num_free

    def serve(self, request: Request, now: float, decode_s: float = DECODE_S) -> Served:
        """Admit ``request`` at ``now`` (waiting for blocks if needed); publish the events."""
        self.advance(now)
        tokens, size = request.tokens, self.allocator.block_size
        extra = blocks_to_append(len(tokens), request.output_len, size)
        if self.cache.blocks_to_admit(tokens) + extra > self.allocator.num_blocks:
            raise OutOfBlocksError(f"{request.name} can never fit {self.name}'s pool")
        start = max(now, self.busy_until)
        while self.cache.blocks_to_admit(tokens) + extra > self.allocator.num_free:
            finish, _, table = self.running.pop(0)  # wait for the earliest to finish
            table.free()
            start = max(start, finish)
        admission = self.cache.admit(tokens)
        if request.output_len:  # its output's blocks, held until it finishes
            admission.table.append_tokens(request.output_len)
        self._publish(tokens)
        self.busy_until = start + admission.computed_tokens / PREFILL_TOKENS_PER_S
        finish = self.busy_until + request.output_len * decode_s
        bisect.insort(self.running, (finish, id(admission.table), admission.table))
        ttft = self.busy_until - request.arrival
        return Served(self.name, admission.hit_tokens, admission.computed_tokens, ttft)

    def _publish(self, tokens: Sequence[int]) -> None:
        evicted, stored = self._changed["evicted"], self._changed["stored"]
        if evicted:
            self.outbox.append(BlockRemoved(sorted(to_int(h) for h in evicted)))
        if stored:  # a run of the prompt's chain: register caches full blocks in order
            chain, size = self.cache.hashes(tokens), self.allocator.block_size
            first = chain.index(stored[0])
            parent = to_int(chain[first - 1]) if first else None
            ids = list(tokens[first * size : (first + len(stored)) * size])
            self.outbox.append(BlockStored([to_int(h) for h in stored], parent, ids, size))
        evicted.clear()
        stored.clear()


class Router:
    """Routes on the engines' events; ``lose_removed`` of ``BlockRemoved`` events are lost."""

    def __init__(
        self,
        engines: Sequence[BlockEngine],
        policy: str,
        overlap_weight: float = 4.0,
        block_size: int | None = None,
        lose_removed: float = 0.0,
        seed: int = 0,
    ) -> None:
        check_choice(policy, "policy", POLICIES)
        self.engines, self.policy, self.overlap_weight = list(engines), policy, overlap_weight
        self.block_size = block_size or self.engines[0].allocator.block_size
        self.index: dict[str, set[int]] = {e.name: set() for e in self.engines}
        self.lose_removed, self._rng, self._turn = lose_removed, random.Random(seed), 0

    def receive(self) -> None:
        """Read every engine's published events into the index."""
        for engine in self.engines:
            held = self.index[engine.name]
            for event in engine.outbox:
                if isinstance(event, BlockStored):
                    held.update(event.block_hashes)
                elif isinstance(event, BlockRemoved):
                    if self._rng.random() >= self.lose_removed:
                        held.difference_update(event.block_hashes)
                elif isinstance(event, AllBlocksCleared):
                    held.clear()
            engine.outbox.clear()

    def overlap(self, name: str, tokens: Sequence[int]) -> int:
        """Leading blocks of ``tokens`` the index says engine ``name`` holds."""
        return leading_hits(tokens, self.block_size, self.index[name])

    def choose(self, tokens: Sequence[int]) -> BlockEngine:
        if self.policy == "round-robin":
            self._turn += 1
            return self.engines[(self._turn - 1) % len(self.engines)]
        if self.policy == "least-loaded":
            return min(self.engines, key=lambda e: e.load())
        loads = {e.name: e.load() for e in self.engines}
        name = kv_pick(tokens, self.block_size, self.index, loads, self.overlap_weight)
        return next(e for e in self.engines if e.name == name)


def kv_pick(
    tokens: Sequence[int],
    block_size: int,
    index: dict[str, set[int]],
    loads: dict[str, int],
    overlap_weight: float,
) -> str:
    """The engine with the highest ``overlap_weight * leading hits - load``, first on a tie."""
    return max(
        loads, key=lambda n: overlap_weight * leading_hits(tokens, block_size, index[n]) - loads[n]
    )


def leading_hits(tokens: Sequence[int], block_size: int, held: set[int]) -> int:
    """Leading full blocks of ``tokens`` whose hash is in ``held``, the last token excluded."""
    hashes = block_hashes(tokens[: (len(tokens) - 1) // block_size * block_size], block_size)
    return next((i for i, h in enumerate(hashes) if to_int(h) not in held), len(hashes))


@dataclass
class RouteStats:
    """One trace through one router: every figure the notebook compares."""

    policy: str
    names: list[str]  # the engines, in order
    served: list[Served] = field(default_factory=list)
    stale: int = 0  # requests that found fewer blocks than the index promised
    stale_tokens: int = 0  # tokens promised cached that the engine had to compute

    @property
    def hit_rate(self) -> float:
        hits = sum(s.hit_tokens for s in self.served)
        return hits / (hits + self.prefill_tokens)

    @property
    def prefill_tokens(self) -> int:
        return sum(s.computed_tokens for s in self.served)

    def per_engine(self) -> dict[str, int]:
        counts = Counter(s.engine for s in self.served)
        return {name: counts[name] for name in self.names}

    @property
    def imbalance(self) -> float:
        """Requests on the busiest engine over the mean (1.0: perfectly even)."""
        return max(self.per_engine().values()) * len(self.names) / len(self.served)

    @property
    def mean_ttft(self) -> float:
        return sum(s.ttft for s in self.served) / len(self.served)

    def p90_ttft(self) -> float:
        ordered = sorted(s.ttft for s in self.served)
        return ordered[int(0.9 * (len(ordered) - 1))]


def route_trace(
    trace: Sequence[Request],
    policy: str,
    num_engines: int = 3,
    num_blocks: int = 96,
    block_sizes: Sequence[int] = (16,),
    overlap_weight: float = 4.0,
    lose_removed: float = 0.0,
) -> RouteStats:
    """Run ``trace`` on fresh engines (block sizes cycled) behind one router of ``policy``."""
    check_int(num_engines, "num_engines", minimum=1)
    engines = [
        BlockEngine(f"E{i}", num_blocks, block_sizes[i % len(block_sizes)])
        for i in range(num_engines)
    ]
    router = Router(engines, policy, overlap_weight, block_sizes[0], lose_removed)
    stats = RouteStats(policy, [e.name for e in engines])
    for request in trace:
        for engine in engines:
            engine.advance(request.arrival)
        router.receive()
        engine = router.choose(request.tokens)
        promised = router.overlap(engine.name, request.tokens) * router.block_size
        served = engine.serve(request, request.arrival)
        stats.stale += served.hit_tokens < promised
        stats.stale_tokens += max(0, promised - served.hit_tokens)
        stats.served.append(served)
    return stats
