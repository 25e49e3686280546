"""Train (or load) the byte-level TinyLlama on Python's help topics and cache it.

    PYTHONPATH=. python scripts/train_tiny_llama.py [--retrain]

Deterministic: fixed seed, fixed thread count (2), fixed steps (pagedlab.model.weights.Recipe).
The weights go to ~/.cache/pagedlab/ (or $PAGEDLAB_CACHE), never into the repository. Prints
the parameter count, the size on disk, the training time and loss, and a greedy sample.
"""

from __future__ import annotations

import argparse

import pagedlab  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab.model import generate_contiguous
from pagedlab.model.weights import Recipe, cache_path, decode, encode, trained_tiny_llama


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retrain", action="store_true", help="drop the cached weights first")
    args = parser.parse_args()
    path = cache_path(Recipe())
    if args.retrain and path.exists():
        path.unlink()
    model, report = trained_tiny_llama()
    print(f"weights: {path} ({path.stat().st_size / 1e6:.2f} MB on disk)")
    print(
        f"{report.parameters:,} parameters, {report.bytes / 1e6:.2f} MB fp32; "
        f"{report.steps} steps in {report.seconds:.0f} s on {Recipe().threads} threads; "
        f"loss {report.first_loss:.2f} -> {report.final_loss:.2f} nats/byte "
        f"on {report.corpus_bytes:,} bytes"
    )
    prompt = "The assert statement"
    print(repr(prompt + decode(generate_contiguous(model, encode(prompt), 80))))


if __name__ == "__main__":
    main()
