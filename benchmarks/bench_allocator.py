"""How fast is the block manager? A decode trace of 20,000 sequences, beside nano-vllm's own.

Each sequence has a prompt of 1..512 tokens and 1..256 decode steps (uniform, seeded). At most
512 run at once; the pool holds enough 16-token blocks for 512 sequences of full length.
Admit -> make room for the prompt -> one token per running sequence per step -> free when done.
The same loop without any allocator calls is timed too: the difference is the manager's cost.
Times are CPU seconds of this process (``time.process_time``), steadier than wall time on a
shared machine; every figure is the best of ``REPEATS`` runs, interleaved, all in one process.

The peer is nano-vllm's real ``BlockManager`` (GeeeekExplorer/nano-vllm at commit bb823b3:
``nanovllm/engine/block_manager.py``, ``sequence.py`` and ``sampling_params.py``), read from the
folder named by the environment variable ``NANO_SRC`` (either a nano-vllm checkout or a folder
holding ``nanovllm/engine/...``). Its files are not part of this repository; without them the
nano-vllm column is skipped, and the benchmark says so. Its block manager imports ``xxhash``
and ``numpy``: ``pip install xxhash`` for this benchmark only (a benchmark peer, not a
dependency of pagedlab). The trace drives it as its ``Scheduler`` does: ``can_allocate`` then
``allocate`` on admission, ``can_append`` then ``may_append`` each decode step, ``append_token``
after it, ``deallocate`` when done. Its ``hash_blocks`` (prefix caching, which pagedlab's
allocator does not do) is timed on a second line, not in the ratio.

Run: NANO_SRC=/path/to/nano-vllm python benchmarks/bench_allocator.py
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

from pagedlab import BlockAllocator, BlockTable
from pagedlab.checks import ceil_div

NUM_SEQUENCES = 20_000
MAX_PROMPT, MAX_DECODE = 512, 256
BLOCK_SIZE = 16
MAX_RUNNING = 512
NUM_BLOCKS = MAX_RUNNING * ceil_div(MAX_PROMPT + MAX_DECODE, BLOCK_SIZE)
REPEATS = 3


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


# --- nano-vllm's own files, from NANO_SRC --------------------------------------------------------


def load_nano() -> tuple[types.ModuleType | None, str]:
    """nano-vllm's ``block_manager`` module and where it came from, or None and why not.

    The files are loaded one by one (``nanovllm/__init__.py`` would import the whole engine,
    torch and all); empty packages stand in for ``nanovllm`` and ``nanovllm.engine``.
    """
    src = os.environ.get("NANO_SRC")
    if not src:
        return None, "NANO_SRC is not set"
    root = Path(src)
    if (root / "nanovllm").is_dir():
        root = root / "nanovllm"
    files = {
        "nanovllm.sampling_params": root / "sampling_params.py",
        "nanovllm.engine.sequence": root / "engine" / "sequence.py",
        "nanovllm.engine.block_manager": root / "engine" / "block_manager.py",
    }
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        return None, f"NANO_SRC={src} lacks {', '.join(missing)}"
    for package in ("nanovllm", "nanovllm.engine"):
        sys.modules.setdefault(package, types.ModuleType(package))
    try:
        for name, path in files.items():
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    except ImportError as error:  # xxhash or numpy missing
        return None, f"nano-vllm's files need {error.name} (pip install {error.name})"
    return module, str(root)


def run_nano(nano: types.ModuleType, trace: list[tuple[int, int]], hash_blocks: bool) -> int:
    """Replay ``trace`` through nano-vllm's ``BlockManager``, called as its ``Scheduler`` does.

    Token ids are distinct per sequence, so no prefix is ever cached. With ``hash_blocks`` the
    manager also hashes each block as it fills (the scheduler's ``postprocess``).
    """
    sequence = sys.modules["nanovllm.engine.sequence"]
    sequence.Sequence.block_size = BLOCK_SIZE
    manager = nano.BlockManager(NUM_BLOCKS, BLOCK_SIZE)
    running: list[tuple[object, int]] = []
    admitted = appends = step = 0
    while admitted < len(trace) or running:
        while len(running) < MAX_RUNNING and admitted < len(trace):
            prompt, decode = trace[admitted]
            seq = sequence.Sequence([admitted * 1024 + t for t in range(prompt)])
            cached = manager.can_allocate(seq)
            assert cached == 0, "distinct token ids: nothing is cached"
            manager.allocate(seq, cached)
            seq.num_scheduled_tokens = prompt  # the prefill writes the prompt's KV
            if hash_blocks:
                manager.hash_blocks(seq)
            seq.num_cached_tokens = prompt
            seq.append_token(prompt)  # the first generated token: the first decode writes it
            running.append((seq, step + decode))
            admitted += 1
        step += 1
        still_running = []
        for entry in running:
            seq, finish = entry
            assert manager.can_append(seq)
            manager.may_append(seq)
            seq.num_scheduled_tokens = 1
            if hash_blocks:
                manager.hash_blocks(seq)
            seq.num_cached_tokens += 1
            seq.append_token(len(seq))  # the token the next step writes
            if finish > step:
                still_running.append(entry)
            else:
                manager.deallocate(seq)
        appends += len(running)
        running = still_running
    assert len(manager.free_block_ids) == NUM_BLOCKS, "blocks leaked"
    return appends


def cpu_seconds(fn: Callable[[], int]) -> tuple[int, float]:
    """``fn()`` and the CPU seconds it took."""
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def main() -> None:
    trace = make_trace()
    nano, where = load_nano()
    runs: dict[str, Callable[[], int]] = {
        "empty": lambda: run(trace, with_allocator=False),
        "pagedlab": lambda: run(trace),
    }
    if nano is not None:
        runs["nano"] = lambda: run_nano(nano, trace, hash_blocks=False)
        runs["nano+hash"] = lambda: run_nano(nano, trace, hash_blocks=True)
    best: dict[str, float] = {}
    appends: dict[str, int] = {}
    for _ in range(REPEATS):  # interleaved, so a busy spell on the machine hits every side
        for name, fn in runs.items():
            appends[name], seconds = cpu_seconds(fn)
            best[name] = min(best.get(name, seconds), seconds)
    assert len(set(appends.values())) == 1, appends
    count, paged = appends["pagedlab"], best["pagedlab"]
    print(f"sequences          {NUM_SEQUENCES:,}  (block {BLOCK_SIZE}, <= {MAX_RUNNING} running)")
    print(f"single-token appends {count:,}   (best of {REPEATS} interleaved runs, CPU seconds)")
    print(f"pagedlab           {paged:.3f} s   ({count / paged / 1e6:.2f} M appends/s)")
    empty = best["empty"]
    print(f"empty loop         {empty:.3f} s   (pagedlab's own cost {paged - empty:.3f} s)")
    if nano is None:
        print(f"nano-vllm          skipped: {where}")
        return
    nano_s = best["nano"]
    print(f"nano-vllm          {nano_s:.3f} s   ({count / nano_s / 1e6:.2f} M appends/s; {where})")
    print(f"  with hash_blocks {best['nano+hash']:.3f} s   (its prefix caching; not in the ratio)")
    print(f"pagedlab is        {nano_s / paged:.2f}x as fast as nano-vllm's BlockManager")


if __name__ == "__main__":
    main()
