"""How long ``pagedlab.model.pretrained()`` takes: cold (no cache), warm (cached), repeated.

Each run is a fresh interpreter with its cache in a temporary folder (``PAGEDLAB_CACHE``), so
nothing is shared with ``~/.cache/pagedlab``: the first process reads the GGUF and writes the
cache, the second reads the cache (its CRC check included), and each process then calls
``pretrained()`` once more. Importing ``transformers`` (for the tokenizer) is timed apart.
Prints the sizes too: parameters, fp32 bytes, the GGUF file and the cache entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, time
import pagedlab
t0 = time.perf_counter()
import transformers  # noqa: F401
t1 = time.perf_counter()
from pagedlab.model import pretrained, smollm2
model, tokenizer = pretrained()
t2 = time.perf_counter()
again, _ = pretrained()
t3 = time.perf_counter()
params = sum(p.numel() for p in model.parameters())
entry = smollm2.cache_entry(smollm2.gguf_path())
print(json.dumps({
    "import_s": t1 - t0, "first_s": t2 - t1, "again_s": t3 - t2, "params": params,
    "gguf_bytes": smollm2.gguf_path().stat().st_size,
    "cache_bytes": sum(f.stat().st_size for f in entry.iterdir()) if entry.is_dir() else 0,
}))
"""


def run(cache: str) -> dict[str, float]:
    env = {**os.environ, "PAGEDLAB_CACHE": cache}
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    import torch

    with tempfile.TemporaryDirectory(prefix="pagedlab-bench-") as cache:
        cold, warm = run(cache), run(cache)
    mib = 2**20
    print(f"SmolLM2-135M-Instruct, torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs")
    print(f"parameters {cold['params']:,} (fp32 {4 * cold['params'] / mib:.0f} MiB)")
    gguf, entry = cold["gguf_bytes"] / mib, cold["cache_bytes"] / mib
    print(f"GGUF file {gguf:.0f} MiB, cache entry {entry:.0f} MiB")
    print("                      seconds")
    print(f"import transformers   {cold['import_s']:7.2f}")
    print(f"cold (GGUF -> cache)  {cold['first_s']:7.2f}")
    print(f"warm (cache, CRC)     {warm['first_s']:7.2f}")
    print(f"again, same process   {warm['again_s']:7.2f}")


if __name__ == "__main__":
    main()
