"""A TinyLlama that has read Python's own help texts: byte-level, trained here, cached.

Nothing can be downloaded, so the model is trained on this machine, deterministically, on
English that Python ships: the help topics of :mod:`pydoc_data.topics` (``help("assert")``
and the rest, about 0.47 MB), one token per UTF-8 byte (vocabulary 256: no tokenizer to
fetch). :func:`train_tiny_llama` runs a fixed number of AdamW steps from a fixed seed with a
fixed thread count; :func:`trained_tiny_llama` loads the cached weights or trains on first
use and caches them (``~/.cache/pagedlab/``, or ``$PAGEDLAB_CACHE``; never committed).

Deterministic means: the same torch build, thread count and CPU give the same weights (float
sums in a fixed order); another CPU may differ in the last bits. The equivalence checks never
depend on it: they compare the engine with the oracle *on the same weights*.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from pagedlab.checks import check_int
from pagedlab.model.llama import TinyLlama

BYTE_CONFIG: dict[str, int | float] = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}
"""The trained model's shape: head_dim 16, grouped-query attention (4 query heads, 2 kv)."""


@dataclass(frozen=True)
class Recipe:
    """Everything the weights depend on (its hash names the cache file)."""

    steps: int = 400
    batch: int = 32
    length: int = 64
    lr: float = 5e-3
    seed: int = 0
    threads: int = 2


@dataclass(frozen=True)
class TrainingReport:
    steps: int
    seconds: float
    first_loss: float  # nats per byte, first batch
    final_loss: float  # mean over the last 20 steps
    parameters: int
    bytes: int  # fp32 weights on disk (the state dict's tensors)
    corpus_bytes: int


def encode(text: str) -> list[int]:
    """UTF-8 bytes as token ids 0..255."""
    return list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    """Token ids back to text; bytes that do not form UTF-8 show as U+FFFD."""
    return bytes(ids).decode("utf-8", errors="replace")


def corpus() -> bytes:
    """Python's help topics, in sorted topic order, as one UTF-8 byte string."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


def cache_dir() -> Path:
    return Path(os.environ.get("PAGEDLAB_CACHE", Path.home() / ".cache" / "pagedlab"))


def cache_path(recipe: Recipe = Recipe()) -> Path:
    key = json.dumps([BYTE_CONFIG, asdict(recipe), torch.__version__], sort_keys=True)
    return cache_dir() / f"tiny_llama_{hashlib.sha256(key.encode()).hexdigest()[:12]}.pt"


def train_tiny_llama(recipe: Recipe = Recipe()) -> tuple[TinyLlama, TrainingReport]:
    """Train from ``recipe.seed`` on the help topics; returns the model (eval mode) and a report."""
    check_int(recipe.steps, "steps", minimum=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(recipe.threads)
    try:
        torch.manual_seed(recipe.seed)
        data = torch.tensor(list(corpus()), dtype=torch.long)
        model = TinyLlama(BYTE_CONFIG, seed=recipe.seed)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=recipe.lr, total_steps=recipe.steps, pct_start=0.1
        )
        generator = torch.Generator().manual_seed(recipe.seed)
        losses: list[float] = []
        start = time.perf_counter()
        for _ in range(recipe.steps):
            top = data.numel() - recipe.length - 1
            at = torch.randint(0, top, (recipe.batch,), generator=generator)
            rows = torch.stack([data[i : i + recipe.length + 1] for i in at.tolist()])
            logits = model(rows[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), rows[:, 1:].flatten())
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    report = TrainingReport(
        steps=recipe.steps,
        seconds=round(seconds, 1),
        first_loss=round(losses[0], 3),
        final_loss=round(sum(losses[-20:]) / len(losses[-20:]), 3),
        parameters=params,
        bytes=sum(t.numel() * t.element_size() for t in model.state_dict().values()),
        corpus_bytes=int(data.numel()),
    )
    return model, report


def trained_tiny_llama(
    recipe: Recipe = Recipe(), train_if_missing: bool = True
) -> tuple[TinyLlama, TrainingReport]:
    """The cached trained model and its report; trains and caches it first if missing.

    ``train_if_missing=False``: FileNotFoundError naming the path instead of training.
    """
    path = cache_path(recipe)
    if path.exists():
        saved = torch.load(path, map_location="cpu", weights_only=True)
        model = TinyLlama(saved["config"])
        model.load_state_dict(saved["state_dict"], strict=True)
        return model, TrainingReport(**json.loads(saved["report"]))
    if not train_if_missing:
        raise FileNotFoundError(f"no trained TinyLlama at {path}: run scripts/train_tiny_llama.py")
    model, report = train_tiny_llama(recipe)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    state = {
        "config": model.config,
        "state_dict": model.state_dict(),
        "report": json.dumps(asdict(report)),
    }
    torch.save(state, tmp)
    tmp.replace(path)
    return model, report


def demo_model() -> tuple[TinyLlama, str]:
    """The trained model if it is cached, else seeded random weights (never trains).

    Returns the model and one line saying which it is. Notebook 10 runs on either: what it
    asserts (token identity, memory) holds for any weights; only the text reads better.
    """
    try:
        model, report = trained_tiny_llama(train_if_missing=False)
    except FileNotFoundError:
        return TinyLlama(BYTE_CONFIG, seed=0, init_std=0.3), (
            "seeded random weights (run scripts/train_tiny_llama.py once for trained ones)"
        )
    return model, (
        f"trained here on Python's help topics: {report.steps} steps, "
        f"loss {report.final_loss:.2f} nats/byte"
    )
