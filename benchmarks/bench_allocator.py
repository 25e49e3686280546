"""How fast is the block manager? A decode trace of 20,000 sequences, beside nano-vllm's own.

Each sequence has a prompt of 1..512 tokens and 1..256 decode steps (uniform, seeded). At most
512 run at once; the pool holds enough 16-token blocks for 512 sequences of full length.
Admit -> make room for the prompt -> one token per running sequence per step -> free when done.

A fair measure: the schedule (who is admitted, who decodes, who finishes, at each step) and
every request with its token list are built *before* the clock starts, so each timed region
holds only block-manager calls over the same precomputed schedule: pagedlab's ``BlockTable``
calls (``BlockTable(allocator)``, ``append_tokens``, ``free``) on one side; on the other,
nano-vllm's ``BlockManager`` called as its ``Scheduler`` calls it (``can_allocate`` then
``allocate`` on admission, ``can_append`` then ``may_append`` each decode step,
``deallocate`` when done) with the per-step bookkeeping its scheduler does on a ``Sequence``
(``num_scheduled_tokens``, ``num_cached_tokens``, ``append_token``). The same loop over the
schedule with no calls is timed too. Times are CPU seconds of this process
(``time.process_time``); every figure is the best of ``REPEATS`` interleaved runs.

The peer is nano-vllm's real code (GeeeekExplorer/nano-vllm at commit bb823b3:
``nanovllm/engine/block_manager.py``, ``sequence.py`` and ``sampling_params.py``), read at run
time from the folder given as the first argument or in ``NANO_SRC`` (a nano-vllm checkout or
a folder holding ``nanovllm/engine/...``). Its files are not part of this repository; without
them the nano-vllm column is skipped, and the benchmark says so. Its block manager imports
``xxhash`` and ``numpy`` (``pip install xxhash`` for this benchmark only; not a dependency of
pagedlab). Its ``hash_blocks`` (prefix caching, which pagedlab's allocator does not do) is
timed on a second line, not in the ratio.

Run: python benchmarks/bench_allocator.py /path/to/nano-vllm
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
from typing import Any

from pagedlab import BlockAllocator, BlockTable
from pagedlab.ground.checks import ceil_div

NUM_SEQUENCES = 20_000
MAX_PROMPT, MAX_DECODE = 512, 256
BLOCK_SIZE = 16
MAX_RUNNING = 512
NUM_BLOCKS = MAX_RUNNING * ceil_div(MAX_PROMPT + MAX_DECODE, BLOCK_SIZE)
REPEATS = 3

# One step: the sequences admitted (with their prompt lengths), those that append one token,
# and those that finish (freed after their append).
Step = tuple[list[tuple[int, int]], list[int], list[int]]


def make_trace(seed: int = 0) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, MAX_PROMPT), rng.randint(1, MAX_DECODE)) for _ in range(NUM_SEQUENCES)]


def make_schedule(trace: list[tuple[int, int]]) -> list[Step]:
    """The steps of ``trace``: admit while fewer than MAX_RUNNING run, then each running
    sequence appends one token; a sequence finishes after its last decode step."""
    schedule: list[Step] = []
    running: list[tuple[int, int]] = []  # (sequence, step at which it finishes)
    admitted = step = 0
    while admitted < len(trace) or running:
        admit = []
        while len(running) < MAX_RUNNING and admitted < len(trace):
            prompt, decode = trace[admitted]
            admit.append((admitted, prompt))
            running.append((admitted, step + decode))
            admitted += 1
        step += 1
        finish = [seq for seq, end in running if end <= step]
        schedule.append((admit, [seq for seq, _ in running], finish))
        running = [entry for entry in running if entry[1] > step]
    return schedule


def run_empty(schedule: list[Step]) -> int:
    """The loop over the schedule with no calls; returns the number of single-token appends."""
    tables: list[Any] = [None] * NUM_SEQUENCES
    appends = 0
    for admit, decode, finish in schedule:
        for seq, _ in admit:
            tables[seq] = seq
        for seq in decode:
            tables[seq]
        for seq in finish:
            tables[seq]
        appends += len(decode)
    return appends


def run_pagedlab(schedule: list[Step], allocator: BlockAllocator) -> int:
    """Replay ``schedule`` with pagedlab's tables over ``allocator``."""
    tables: list[Any] = [None] * NUM_SEQUENCES
    appends = 0
    for admit, decode, finish in schedule:
        for seq, prompt in admit:
            table = tables[seq] = BlockTable(allocator)
            table.append_tokens(prompt)
        for seq in decode:
            tables[seq].append_tokens(1)
        for seq in finish:
            tables[seq].free()
        appends += len(decode)
    return appends


# --- nano-vllm's own files, from the path given at run time --------------------------------------


def load_nano(src: str | None) -> tuple[types.ModuleType | None, str]:
    """nano-vllm's ``block_manager`` module and where it came from, or None and why not.

    The files are loaded one by one (``nanovllm/__init__.py`` would import the whole engine,
    torch and all); empty packages stand in for ``nanovllm`` and ``nanovllm.engine``.
    """
    if not src:
        return None, "no nano-vllm folder given (first argument or NANO_SRC)"
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
        return None, f"{src} lacks {', '.join(missing)}"
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


def nano_sequences(trace: list[tuple[int, int]]) -> list[Any]:
    """One nano-vllm ``Sequence`` per request, its prompt's token ids distinct from every other
    request's first block (so nothing is ever a prefix-cache hit)."""
    sequence = sys.modules["nanovllm.engine.sequence"]
    sequence.Sequence.block_size = BLOCK_SIZE
    return [sequence.Sequence([seq] + [0] * (prompt - 1)) for seq, (prompt, _) in enumerate(trace)]


def run_nano(schedule: list[Step], manager: Any, seqs: list[Any], hash_blocks: bool) -> int:
    """Replay ``schedule`` through nano-vllm's ``BlockManager``, called as its ``Scheduler``
    does (``schedule`` and ``postprocess``). With ``hash_blocks`` the manager also hashes
    each block as it fills."""
    appends = 0
    for admit, decode, finish in schedule:
        for i, prompt in admit:
            seq = seqs[i]
            manager.allocate(seq, manager.can_allocate(seq))
            seq.num_scheduled_tokens = prompt  # the prefill writes the prompt's KV
            if hash_blocks:
                manager.hash_blocks(seq)
            seq.num_cached_tokens += prompt
            seq.append_token(i)  # the first generated token: the first decode writes it
        for i in decode:
            seq = seqs[i]
            if not manager.can_append(seq):
                raise AssertionError("the pool holds every running sequence")
            manager.may_append(seq)
            seq.num_scheduled_tokens = 1
            if hash_blocks:
                manager.hash_blocks(seq)
            seq.num_cached_tokens += 1
            seq.append_token(i)  # the token the next step writes
        for i in finish:
            manager.deallocate(seqs[i])
        appends += len(decode)
    return appends


def cpu_seconds(prepare: Callable[[], Any], replay: Callable[[Any], int]) -> tuple[int, float]:
    """``replay(prepare())`` and the CPU seconds ``replay`` alone took."""
    state = prepare()
    start = time.process_time()
    result = replay(state)
    return result, time.process_time() - start


def main() -> None:
    trace = make_trace()
    schedule = make_schedule(trace)
    nano, where = load_nano(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("NANO_SRC"))
    runs: dict[str, tuple[Callable[[], Any], Callable[[Any], int]]] = {
        "empty": (lambda: None, lambda _: run_empty(schedule)),
        "pagedlab": (
            lambda: BlockAllocator(NUM_BLOCKS, BLOCK_SIZE),
            lambda allocator: run_pagedlab(schedule, allocator),
        ),
    }
    if nano is not None:
        for name, hashed in (("nano", False), ("nano+hash", True)):
            runs[name] = (
                lambda: (nano.BlockManager(NUM_BLOCKS, BLOCK_SIZE), nano_sequences(trace)),
                lambda state, hashed=hashed: run_nano(schedule, *state, hash_blocks=hashed),
            )
    best: dict[str, float] = {}
    appends: dict[str, int] = {}
    for _ in range(REPEATS):  # interleaved, so a busy spell on the machine hits every side
        for name, (prepare, replay) in runs.items():
            appends[name], seconds = cpu_seconds(prepare, replay)
            best[name] = min(best.get(name, seconds), seconds)
    assert len(set(appends.values())) == 1, appends
    count, paged, empty = appends["pagedlab"], best["pagedlab"], best["empty"]
    print(f"sequences          {NUM_SEQUENCES:,}  (block {BLOCK_SIZE}, <= {MAX_RUNNING} running)")
    print(f"single-token appends {count:,}   (best of {REPEATS} interleaved runs, CPU seconds)")
    print(f"pagedlab           {paged:.3f} s   ({count / paged / 1e6:.2f} M appends/s)")
    print(f"empty loop         {empty:.3f} s   (the schedule's loop, no calls)")
    if nano is None:
        print(f"nano-vllm          skipped: {where}")
        return
    nano_s = best["nano"]
    print(f"nano-vllm          {nano_s:.3f} s   ({count / nano_s / 1e6:.2f} M appends/s; {where})")
    print(f"  with hash_blocks {best['nano+hash']:.3f} s   (its prefix caching; not in the ratio)")
    print(f"pagedlab is        {nano_s / paged:.2f}x as fast as nano-vllm's BlockManager")
    print(f"  less the loop    {(nano_s - empty) / (paged - empty):.2f}x")


if __name__ == "__main__":
    main()
