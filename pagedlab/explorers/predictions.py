"""The Predict cells of notebooks 01, 02, 05, 06, 07, 09 and 12: each question's answer and
explanation are computed here, from the same scene the next cell of the notebook builds
(pagedlab.pictures.scenes, pagedlab.ground.paper), so no notebook cell's source holds an answer.

``predict("05")`` returns the widget of notebook 05 (see :mod:`pagedlab.explorers.predict`).
Every answer is read off real objects: a real allocator's free list, real ref counts after a
real fork and append, a real prefix cache, the paper's measured figure, a real scheduler run.
"""

from __future__ import annotations

from collections.abc import Callable

from pagedlab.explorers.predict import Predict
from pagedlab.frontier.fleet.routing import BlockEngine, Router, multi_tenant_trace
from pagedlab.ground import paper
from pagedlab.memory.allocator import BlockAllocator
from pagedlab.memory.block_table import BlockTable
from pagedlab.memory.prefix_cache import PrefixCache
from pagedlab.memory.sharing import fork_samples
from pagedlab.pictures import scenes
from pagedlab.simulate.reservation import OneRequest


def _why_paging() -> Predict:
    """01: Fig. 3's request A in a 2048-slot reservation; how many slots are never used?"""
    end = OneRequest(prompt=8, response=2, generated=2, reserved_slots=2048, block_size=16)
    return Predict(
        "A request has an 8-token prompt and will generate 2 tokens. A contiguous allocator "
        "reserved 2048 slots for it (one slot: one token's keys and values). How many of "
        "those 2048 slots never hold a token?",
        answer=end.never_used,
        explain=f"By its end the request holds {end.tokens} tokens, so {end.never_used} slots "
        "are never used: the paper's Fig. 3 counts the same 2038 for its request A. With "
        f"blocks of 16, paging holds {end.paged_blocks} block and leaves {end.paged_waste} "
        "slots empty.",
    )


def _block_table() -> Predict:
    """02: the example's history leaves the free list [4, 1, 0]; where does token 9 land?

    Notebook 00 already showed tokens 1-5 (blocks [4, 1]); this asks the next boundary."""
    pool, running = scenes.example_history(num_blocks=8, block_size=4, finished=False)
    held = [b for table in running for b in table.blocks]
    free_list = pool.free_list()
    seq = BlockTable(pool)
    seq.append_tokens(9)
    first, second, third = seq.blocks
    return Predict(
        f"Other requests hold blocks {held} and the free list, front first, is {free_list}. A "
        "new sequence in blocks of 4 grows token by token to 9 tokens. Which physical block "
        "holds token 9 (position 8)?",
        answer=seq.slot(8)[0],
        explain=f"Tokens 1-4 fill logical block 0, which took the front of the free list, "
        f"{first}; tokens 5-8 fill logical block 1 ({second}); token 9 opens logical block 2, "
        f"which takes the next free block, {third}. Neither the table nor the allocator looks "
        "for a block next to the previous one.",
    )


def _sharing() -> Predict:
    """05: Fig. 8's prompt, forked into two samples; A1 appends one token."""
    prompt = scenes.figure8_prompt()
    blocks, length = list(prompt.blocks), prompt.num_tokens  # before A1 (the prompt itself) grows
    a1, _a2 = fork_samples(prompt, 2)
    cow = a1.append_tokens(1)
    pool = prompt.allocator
    copy = a1.blocks[-1]
    answer = [pool.refcount(blocks[0]), pool.refcount(blocks[1]), pool.refcount(copy)]
    copied = f"copies it into a free block ({copy}) first" if cow is not None else "writes it"
    return Predict(
        f"A prompt of {length} tokens sits in blocks {blocks[0]} and {blocks[1]} "
        f"(blocks of {pool.block_size}). fork_samples makes two samples, A1 and A2, that share "
        f"both blocks. Then A1 appends one token. What are the ref counts of block {blocks[0]}, "
        f"of block {blocks[1]} and of the block A1's new token lands in?",
        answer=answer,
        explain=f"Block {blocks[0]} is full and stays shared. A1's token would land in block "
        f"{blocks[1]}, which is shared and partly filled, so A1 {copied} and writes there: "
        f"block {blocks[1]} drops to {answer[1]}, the copy has {answer[2]}.",
    )


def _prefix_caching() -> Predict:
    """06: A's prompt is the system prompt + [1, 2, 3]; B's the system prompt + [7, 8]."""
    system = list(scenes.SYSTEM_PROMPT)
    cache = PrefixCache(BlockAllocator(16, 4))
    cache.admit(system + [1, 2, 3])
    second = cache.admit(system + [7, 8])
    return Predict(
        f"Blocks of 4. Request A's prompt is the {len(system)}-token system prompt followed by "
        "[1, 2, 3]; then request B arrives with the system prompt followed by [7, 8]. How many "
        "of B's blocks come from the cache?",
        answer=len(second.hit_blocks),
        explain=f"B's first {len(second.hit_blocks)} blocks are the system prompt, cached by A "
        "under the same chained hashes. Its next block [7, 8] differs from A's and is only "
        "partly filled anyway: partly filled blocks are never cached.",
    )


SHARE_BINS = ((0.3, "under 30 %"), (0.6, "30 to 60 %"), (0.9, "60 to 90 %"), (1.01, "over 90 %"))


def _memory_at_scale() -> Predict:
    """07: the share of Orca (Max)'s KV memory that holds token states (the paper's Fig. 2)."""
    share = paper.FIG2_TOKEN_SHARE["Orca (Max)"]
    answer = next(label for top, label in SHARE_BINS if share < top)
    return Predict(
        "Orca (Max) reserves 2048 slots for every request. On the ShareGPT trace, what share "
        "of its KV memory holds token states (the paper's Fig. 2)?",
        answer=answer,
        choices=[label for _top, label in SHARE_BINS],
        explain=f"The paper measures {share:.1%} for Orca (Max) (Fig. 2); the simulation below "
        "computes our own figure and checks it against the paper's.",
    )


def _when_memory_runs_out() -> Predict:
    """09: the scheduler scene in swap mode; which request is preempted first?"""
    engine, _kv = scenes.scheduler_scene("swap", block_size=4)
    names = [r.name for r in scenes.SCHEDULER_REQUESTS]
    while True:
        result = engine.step()
        if result.preempted or engine.done:
            break
    victim = result.preempted[0]
    running = [g.name for g in engine.running]
    return Predict(
        f"The scene's requests {', '.join(names)} arrive in that order on a pool of "
        f"{scenes.SCHEDULER_POOL_BLOCKS} blocks of 4; each step every running sequence grows "
        "by one token. When an append first finds no free block, which request is preempted?",
        answer=victim,
        choices=names,
        explain=f"At step {result.step}, {victim} is the most recently arrived running request: "
        "FCFS preempts the latest first (§4.5), all of its blocks at once. Still running: "
        f"{', '.join(running)}.",
    )


def _past_one_engine() -> Predict:
    """12: an engine with blocks of 32 behind a router hashing blocks of 16: how many hits?"""
    engines = [BlockEngine("E0", 96, 16), BlockEngine("E1", 96, 16), BlockEngine("E2", 96, 32)]
    router = Router(engines, "round-robin")
    trace = multi_tenant_trace(num_requests=30)
    for request in trace:
        router.receive()
        router.choose(request.tokens).serve(request, request.arrival)
    router.receive()
    found = sum(router.overlap("E2", r.tokens) for r in trace)
    cached = len(engines[2].cache.cached_blocks())
    return Predict(
        "Three engines share one router. E0 and E1 cache blocks of 16 tokens, E2 blocks of 32; "
        "the router hashes prompts in blocks of 16. After 30 requests of six tenants (each "
        "with a 256-token system prompt) went round-robin, how many cached prefix blocks "
        "does the router find on E2, summed over the 30 prompts?",
        answer=found,
        explain=f"E2 published {len(router.index['E2'])} block hashes and holds {cached} "
        "cached blocks, but a hash covers its whole prefix at E2's block size: a 32-token "
        "block's hash is never any 16-token block's hash, so no lookup ever matches.",
    )


PREDICTIONS: dict[str, Callable[[], Predict]] = {
    "01": _why_paging,
    "02": _block_table,
    "05": _sharing,
    "06": _prefix_caching,
    "07": _memory_at_scale,
    "09": _when_memory_runs_out,
    "12": _past_one_engine,
}


def predict(notebook: str) -> Predict:
    """The Predict widget of notebook ``notebook`` ("01", "02", "05", "06", "07", "09" or "12")."""
    key = str(notebook)[:2]
    if key not in PREDICTIONS:
        raise ValueError(
            f"no Predict cell for notebook {notebook!r}; there are: {list(PREDICTIONS)}"
        )
    return PREDICTIONS[key]()
