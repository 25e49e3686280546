"""The scheduler's guards: everything a step will touch, checked before it touches anything.

Each raises (``TypeError``, ``ValueError``) naming the argument, group, table or block at
fault, and none changes anything. They take allocators and groups, never the scheduler. The
rule behind the pool checks: the pools are the scheduler's alone (blocks it cannot free would
make its preemptions unable to make room: a livelock).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.capacity import prefill_need
from pagedlab.memory.requests import STATUSES, Group, Request, StepOutput, StepPlan

HOOKS = ("swap_out", "swap_in", "copy", "forward")


def check_scheduler_args(allocator: object, host: object, kv: object) -> BlockAllocator:
    """A new scheduler's pools and ``kv`` (:func:`check_hooks`), checked; returns its host pool
    (a fresh one the size of the device pool when ``host`` is None: §4.5's bound)."""
    if not isinstance(allocator, BlockAllocator):
        raise TypeError(f"allocator must be a BlockAllocator, got {type(allocator).__name__}")
    if host is None:
        host = BlockAllocator(allocator.num_blocks, allocator.block_size)
    if not isinstance(host, BlockAllocator):
        raise TypeError(f"host must be a BlockAllocator, got {type(host).__name__}")
    if host is allocator:
        raise ValueError("host must be a pool of its own, not the device allocator itself")
    if host.block_size != allocator.block_size:
        raise ValueError(
            f"host block_size {host.block_size} != device block_size {allocator.block_size}"
        )
    check_fresh_pool(allocator, "allocator")
    check_fresh_pool(host, "host")
    check_hooks(kv, allocator, host)
    return host


def check_request(
    request: object, added: dict[str, Group], device: BlockAllocator, token_budget: int | None
) -> None:
    """Refuse a request that is not one, reuses a name, or could never run (its group at its
    longest needs more blocks than the pool has, or decodes more than the budget)."""
    if not isinstance(request, Request):
        raise TypeError(f"request must be a Request, got {type(request).__name__}")
    r, size = request, device.block_size
    if r.name in added:
        raise ValueError(f"a request named {r.name!r} was already added")
    need = prefill_need(r.prompt_len, r.output_len, r.num_samples, size)
    if need > device.num_blocks:
        raise ValueError(
            f"request {r.name!r} can grow to {need} blocks of {size} "
            f"({r.num_samples} sample(s) x {r.prompt_len + r.output_len} tokens, the "
            f"prompt's full blocks shared), more than the pool's {device.num_blocks}: "
            f"it could never run"
        )
    if token_budget is not None and r.num_samples > token_budget:
        raise ValueError(
            f"request {r.name!r} decodes {r.num_samples} tokens a step, more "
            f"than token_budget = {token_budget}: it could never decode"
        )


def check_update(
    plan: object, pending: StepPlan | None, output: object, groups: dict[str, Group]
) -> None:
    """Refuse a plan that is not the pending one, or an output that is not a
    :class:`StepOutput` of running groups' samples."""
    if plan is None or plan is not pending:
        step = pending.step if pending is not None else None
        raise ValueError(
            f"plan must be the plan of the step scheduled last and not updated yet "
            f"(step {step}), got {plan!r:.60}"
        )
    if not isinstance(output, StepOutput):
        raise TypeError(f"output must be a StepOutput, got {type(output).__name__}")
    for name, per_sample in output.tokens.items():
        group = groups.get(name)
        if group is None or group.status != "running" or len(per_sample) != len(group.token_ids):
            raise ValueError(f"output: {name!r} is not a running request with those samples")


def check_fresh_pool(pool: BlockAllocator, name: str) -> None:
    """Refuse a pool with blocks already in use: the scheduler must hold every used block."""
    used = pool.num_blocks - pool.num_free
    if used:
        held = [b for b, count in enumerate(pool.refcounts()) if count]
        raise ValueError(
            f"{name} has {used} block(s) in use already ({_short(held)}); the scheduler needs "
            f"a pool of its own (blocks held outside it could never be freed to make room)"
        )


def check_hooks(kv: object, device: BlockAllocator, host: BlockAllocator) -> None:
    """Refuse ``kv`` unless it has every hook and (if it can say) fits both pools."""
    if kv is None:
        return
    missing = [name for name in HOOKS if not callable(getattr(kv, name, None))]
    if missing:
        raise TypeError(
            f"kv must implement KVHooks ({', '.join(HOOKS)}); {type(kv).__name__} lacks "
            f"{', '.join(missing)}"
        )
    check_pools = getattr(kv, "check_pools", None)
    if callable(check_pools):
        check_pools(device, host)


def tokens_expected(group: Group) -> list[int]:
    """Tokens each table of running ``group`` holds, from its counters alone.

    Mid-prefill: the prompt goes into one table; once it is in, each sample's table holds the
    prompt and (sample by sample, as ``Scheduler`` prefills) its generated tokens.
    """
    r, done = group.request, group.prefilled
    if group.prefilling and done < r.prompt_len:
        return [done]
    if not group.prefilling:
        return [group.num_tokens] * r.num_samples
    g, extra = group.generated, done - r.prompt_len
    return [r.prompt_len + min(g, max(0, extra - i * g)) for i in range(r.num_samples)]


def check_tables(running: Iterable[Group]) -> None:
    """Refuse a running group whose table was freed, lost a block, or grew behind its back."""
    for group in running:
        for sample, table in enumerate(group.tables):
            if table.freed or table.lost:
                try:
                    table.check_usable("step")
                except ValueError as error:
                    raise ValueError(f"group {group.name!r} sample {sample}: {error}") from None
        held = [t.num_tokens for t in group.tables]
        want = tokens_expected(group)
        if held != want:
            raise ValueError(
                f"group {group.name!r}: its tables hold {held} tokens, the scheduler expects "
                f"{want}: a table was changed behind the scheduler's back"
            )


def check_host_blocks(swapped: Iterable[Group], host: BlockAllocator) -> None:
    """Refuse a swapped group whose host blocks lost or gained a holder behind its back."""
    for group in swapped:
        for block, held in Counter(b for blocks in group.host for b in blocks).items():
            count = host.refcount(block)
            if count != held:
                raise ValueError(
                    f"swapped group {group.name!r}: host block {block} has ref count {count}, "
                    f"but its {held} sample(s) hold it: it was freed or shared outside the "
                    f"scheduler, so swapping it in would lose or overwrite K/V"
                )


def check_pool_unchanged(pool: BlockAllocator, name: str, held: list[int]) -> None:
    """Refuse a pool whose ref counts differ from ``held`` (what the scheduler holds): someone
    outside took or freed blocks."""
    counts = pool.refcounts()
    outside = [b for b, (have, want) in enumerate(zip(counts, held, strict=True)) if have > want]
    if outside:
        raise ValueError(
            f"{name}: block(s) {_short(outside)} are held outside the scheduler; it cannot "
            f"free them to make room (release them first, or give the scheduler its own pool)"
        )
    gone = [b for b, (have, want) in enumerate(zip(counts, held, strict=True)) if have < want]
    if gone:
        raise ValueError(
            f"{name}: block(s) {_short(gone)} were freed behind the scheduler's back while its "
            f"groups still hold them"
        )


def _short(blocks: list[int], limit: int = 8) -> str:
    shown = ", ".join(map(str, blocks[:limit]))
    return f"[{shown}{', ...' if len(blocks) > limit else ''}]"


def held_counts(
    holding: Iterable[Group], swapped: Iterable[Group], num_device: int, num_host: int
) -> tuple[list[int], list[int]]:
    """How many tables of ``holding`` hold each device block, and how many samples of
    ``swapped`` each host block: what the pools' ref counts must be."""
    device, host = [0] * num_device, [0] * num_host
    for group in holding:
        for table in group.tables:
            for block in table.blocks:
                device[block] += 1
    for group in swapped:
        for held in group.host:
            for block in held:
                host[block] += 1
    return device, host


def check_invariants(
    queues: tuple[list[Group], ...],
    finishing: list[Group],
    device: BlockAllocator,
    host: BlockAllocator,
) -> None:
    """AssertionError if a block leaked or a group of the ``queues`` (waiting, running, swapped,
    finished) is in an impossible state; ``finishing`` groups hold their blocks until complete."""
    waiting, running, swapped, finished = queues
    for group in (*waiting, *running, *swapped, *finished):
        if group.status not in STATUSES:
            raise AssertionError(f"{group} has status {group.status!r}, not one of {STATUSES}")
    for group in running:
        if not group.prefilling:
            tokens = {t.num_tokens for t in group.tables}
            if len(group.tables) != group.request.num_samples or tokens != {group.num_tokens}:
                raise AssertionError(f"{group} holds tokens {tokens}")
    for group in swapped:
        if group.tables:
            raise AssertionError(f"swapped {group} still holds device blocks")
    for group in waiting + finished:
        if group.tables or group.host:
            raise AssertionError(f"{group} holds blocks")
    held_device, held_host = held_counts(
        [*running, *finishing], swapped, device.num_blocks, host.num_blocks
    )
    if held_device != device.refcounts():
        raise AssertionError(f"device ref counts {device.refcounts()} != held {held_device}")
    if held_host != host.refcounts():
        raise AssertionError(f"host ref counts {host.refcounts()} != held {held_host}")
