"""How fast is the block manager? A decode trace of 20,000 sequences, printed as figures.

Each sequence has a prompt of 1..512 tokens and 1..256 decode steps (uniform, seeded). At most
512 run at once; the pool holds enough 16-token blocks for 512 sequences of full length.
Admit -> append the prompt -> one token per running sequence per step -> free when done.
The same loop without any allocator calls is timed too: the difference is the manager's cost.
Times are CPU seconds of this process (``time.process_time``), steadier than wall time on a
shared machine.

The same trace also runs through a block manager built the way nano-vllm's
``engine/block_manager.py`` (GeeeekExplorer/nano-vllm) is: a deque of free block ids, a set
of used ones, a chained hash of every full block (xxhash's xxh64 as nano-vllm uses, if it is
installed, else blake2b), ``allocate`` / ``may_append`` / ``deallocate`` per sequence. It is
written here from that design, to compare like with like on one machine.

Run: python benchmarks/bench_allocator.py
"""

from __future__ import annotations

import hashlib
import random
import time
import tracemalloc
from collections import deque
from collections.abc import Callable

import numpy as np

from pagedlab import BlockAllocator, BlockTable
from pagedlab.checks import ceil_div

NUM_SEQUENCES = 20_000
MAX_PROMPT, MAX_DECODE = 512, 256
BLOCK_SIZE = 16
MAX_RUNNING = 512
NUM_BLOCKS = MAX_RUNNING * ceil_div(MAX_PROMPT + MAX_DECODE, BLOCK_SIZE)


def make_trace(seed: int = 0) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, MAX_PROMPT), rng.randint(1, MAX_DECODE)) for _ in range(NUM_SEQUENCES)]


def run(trace: list[tuple[int, int]], with_allocator: bool = True) -> int:
    """Replay ``trace`` with pagedlab's tables; returns the number of single-token appends."""
    allocator = BlockAllocator(NUM_BLOCKS, BLOCK_SIZE)
    running: list[tuple[BlockTable | None, int]] = []  # (table, step at which it finishes)
    admitted = appends = step = 0
    while admitted < len(trace) or running:
        while len(running) < MAX_RUNNING and admitted < len(trace):
            prompt, decode = trace[admitted]
            table = None
            if with_allocator:
                table = BlockTable(allocator)
                table.append_tokens(prompt)
            running.append((table, step + decode))
            admitted += 1
        step += 1
        still_running = []
        for entry in running:
            table, finish = entry
            if table is not None:
                table.append_tokens(1)
            if finish > step:
                still_running.append(entry)
            elif table is not None:
                table.free()
        appends += len(running)
        running = still_running
    if with_allocator:
        assert allocator.num_free == allocator.num_blocks, "blocks leaked"
    return appends


# --- the nano-vllm-style block manager ---------------------------------------------------------


def _hasher() -> tuple[str, Callable[[bytes, int], int]]:
    try:
        import xxhash  # type: ignore[import-not-found]
    except ImportError:

        def blake(payload: bytes, prefix: int) -> int:
            head = prefix.to_bytes(8, "little", signed=True) if prefix != -1 else b""
            return int.from_bytes(hashlib.blake2b(head + payload, digest_size=8).digest())

        return "blake2b (xxhash is not installed)", blake

    def xxh(payload: bytes, prefix: int) -> int:
        h = xxhash.xxh64()
        if prefix != -1:
            h.update(prefix.to_bytes(8, "little"))
        h.update(payload)
        return int(h.intdigest())

    return "xxhash xxh64", xxh


HASH_NAME, HASH = _hasher()


class NanoBlock:
    __slots__ = ("block_id", "ref_count", "hash", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id, self.ref_count, self.hash, self.token_ids = block_id, 0, -1, []


class NanoSequence:
    """The token ids and block table of one sequence (nano-vllm's ``Sequence``, reduced)."""

    def __init__(self, token_ids: list[int]) -> None:
        self.token_ids = token_ids
        self.block_table: list[int] = []

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_blocks(self) -> int:
        return ceil_div(len(self.token_ids), BLOCK_SIZE)

    def block(self, i: int) -> list[int]:
        return self.token_ids[i * BLOCK_SIZE : (i + 1) * BLOCK_SIZE]


class NanoBlockManager:
    """Free ids in a deque, used ids in a set, a chained hash per full block (prefix caching)."""

    def __init__(self, num_blocks: int) -> None:
        self.blocks = [NanoBlock(i) for i in range(num_blocks)]
        self.hash_to_block_id: dict[int, int] = {}
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()

    def _take(self, block_id: int) -> NanoBlock:
        block = self.blocks[block_id]
        block.ref_count, block.hash, block.token_ids = 1, -1, []
        self.free_block_ids.remove(block_id)
        self.used_block_ids.add(block_id)
        return block

    def allocate(self, seq: NanoSequence) -> None:
        h, miss = -1, False
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            full = len(token_ids) == BLOCK_SIZE
            h = HASH(np.array(token_ids).tobytes(), h) if full else -1
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id == -1 or self.blocks[block_id].token_ids != token_ids:
                miss = True
            if miss:
                block = self._take(self.free_block_ids[0])
            elif block_id in self.used_block_ids:
                block = self.blocks[block_id]
                block.ref_count += 1
            else:
                block = self._take(block_id)
            if h != -1:
                block.hash, block.token_ids = h, token_ids
                self.hash_to_block_id[h] = block.block_id
            seq.block_table.append(block.block_id)

    def may_append(self, seq: NanoSequence) -> None:
        """Called with the sequence's newest token counted, before its KV is written."""
        table = seq.block_table
        last = self.blocks[table[-1]]
        if len(seq) % BLOCK_SIZE == 1:
            table.append(self._take(self.free_block_ids[0]).block_id)
        elif len(seq) % BLOCK_SIZE == 0:
            token_ids = seq.block(seq.num_blocks - 1)
            prefix = self.blocks[table[-2]].hash if len(table) > 1 else -1
            last.hash = HASH(np.array(token_ids).tobytes(), prefix)
            last.token_ids = token_ids
            self.hash_to_block_id[last.hash] = last.block_id

    def deallocate(self, seq: NanoSequence) -> None:
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.used_block_ids.remove(block_id)
                self.free_block_ids.append(block_id)
        seq.block_table.clear()


def run_nano(trace: list[tuple[int, int]]) -> int:
    """Replay ``trace`` through :class:`NanoBlockManager`; token ids are distinct per sequence."""
    manager = NanoBlockManager(NUM_BLOCKS)
    running: list[tuple[NanoSequence, int]] = []
    admitted = appends = step = 0
    while admitted < len(trace) or running:
        while len(running) < MAX_RUNNING and admitted < len(trace):
            prompt, decode = trace[admitted]
            seq = NanoSequence([admitted * 1024 + t for t in range(prompt)])
            manager.allocate(seq)
            running.append((seq, step + decode))
            admitted += 1
        step += 1
        still_running = []
        for entry in running:
            seq, finish = entry
            seq.token_ids.append(len(seq))  # the token whose KV this step writes
            manager.may_append(seq)
            if finish > step:
                still_running.append(entry)
            else:
                manager.deallocate(seq)
        appends += len(running)
        running = still_running
    assert len(manager.free_block_ids) == NUM_BLOCKS, "blocks leaked"
    return appends


def _timed(fn: Callable[[], int]) -> tuple[int, float]:
    """``fn()`` and the CPU seconds it took (CPU time: the machine may be shared)."""
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def main() -> None:
    trace = make_trace()
    run(trace[:500])  # warm up
    run_nano(trace[:500])
    _, empty = _timed(lambda: run(trace, with_allocator=False))
    appends, seconds = _timed(lambda: run(trace))
    nano_appends, nano = _timed(lambda: run_nano(trace))
    assert nano_appends == appends
    tracemalloc.start()
    run(trace)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"sequences          {NUM_SEQUENCES:,}  (block size {BLOCK_SIZE}, <= {MAX_RUNNING} running)"
    )
    print(f"single-token appends {appends:,}")
    print(f"whole trace        {seconds:.3f} s   ({appends / seconds / 1e6:.2f} M appends/s)")
    print(f"empty loop         {empty:.3f} s   (allocator's own cost {seconds - empty:.3f} s)")
    print(f"nano-vllm-style    {nano:.3f} s   (hash: {HASH_NAME})")
    print(f"pagedlab is        {nano / seconds:.2f}x as fast as the nano-vllm-style manager")
    print(f"peak Python memory {peak / 2**20:.1f} MiB (tracemalloc, one more run)")


if __name__ == "__main__":
    main()
