"""pagedlab.model's guards: every public function and method starts with one named guard, and
bad input raises a TypeError (wrong kind) or ValueError (wrong value) naming the value and
changes nothing: the model's weights, a cache's K/V, the caller's arguments.
"""

from __future__ import annotations

import ast
import inspect
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import pagedlab  # noqa: F401  (first: sets TRITON_INTERPRET)
from pagedlab import PagedKVCache
from pagedlab.model import (
    TINY,
    TinyLlama,
    agreement,
    generate_contiguous,
    gguf_file,
    kv,
    layers,
    llama,
    paged,
    sample_contiguous,
    sampling,
    smollm2,
)
from pagedlab.model import generate as generate_module
from pagedlab.model.agreement import Segments, first_divergence, last_hidden, last_logits
from pagedlab.model.checks import parameter_shapes
from pagedlab.model.gguf_file import (
    hf_name,
    llama_config_from_gguf,
    read_llama_gguf,
    unpermute_rows,
)
from pagedlab.model.kv import ContiguousCache, DenseCausal, causal_attention, invariant_attention
from pagedlab.model.layers import (
    MLP,
    Attention,
    DecoderLayer,
    RMSNorm,
    apply_rotary,
    project,
    rotary,
)
from pagedlab.model.paged import PagedStep, Piece
from pagedlab.model.sampling import draw, sample_generator, sample_seed
from pagedlab.model.smollm2 import cache_entry, chat_prompt, pretrained, transformers_greedy
from tests.refuses import refuses

MODEL = TinyLlama(TINY, seed=0)
KIND, VALUE = TypeError, ValueError


def weights() -> list[bytes]:
    """The model's every weight, as bytes: a refused call must leave them as they were."""
    return [t.numpy().tobytes() for t in MODEL.state_dict().values()]


def qkv(n: int = 3, keys: int = 3, heads: int = 4, kv_heads: int = 2, d: int = 8):
    gen = torch.Generator().manual_seed(n)
    q = torch.randn(n, heads, d, generator=gen)
    return q, torch.randn(keys, kv_heads, d, generator=gen), torch.randn(keys, kv_heads, d)


IDS = torch.tensor([[1, 5, 9]])
GOOD_HIDDEN = (torch.tensor([1, 5, 9]), torch.arange(3), DenseCausal(1, 3))

# (label, call, error kind, a value the message must name)
CASES: list[tuple[str, Callable[[], object], type[Exception], object]] = [
    # generate_contiguous / sample_contiguous
    ("generate empty prompt", lambda: generate_contiguous(MODEL, [], 3), VALUE, "[]"),
    ("generate id >= vocab", lambda: generate_contiguous(MODEL, [1, 64], 3), VALUE, "64"),
    ("generate negative id", lambda: generate_contiguous(MODEL, [-1], 3), VALUE, "-1"),
    ("generate float id", lambda: generate_contiguous(MODEL, [1.5], 3), KIND, "1.5"),
    ("generate str prompt", lambda: generate_contiguous(MODEL, "abc", 3), KIND, "str"),
    ("generate tensor prompt", lambda: generate_contiguous(MODEL, IDS[0], 3), KIND, "Tensor"),
    ("generate max_new -1", lambda: generate_contiguous(MODEL, [1], -1), VALUE, "-1"),
    ("generate max_new True", lambda: generate_contiguous(MODEL, [1], True), KIND, "True"),
    ("generate too long", lambda: generate_contiguous(MODEL, [1] * 250, 10), VALUE, "260"),
    ("generate no model", lambda: generate_contiguous(None, [1], 3), KIND, "NoneType"),
    ("sample n 0", lambda: sample_contiguous(MODEL, [1], 2, n=0), VALUE, "n must be >= 1"),
    ("sample temp -1", lambda: sample_contiguous(MODEL, [1], 2, temperature=-1.0), VALUE, "-1.0"),
    (
        "sample temp nan",
        lambda: sample_contiguous(MODEL, [1], 2, temperature=math.nan),
        VALUE,
        "nan",
    ),
    ("sample temp str", lambda: sample_contiguous(MODEL, [1], 2, temperature="hot"), KIND, "hot"),
    ("sample seed -1", lambda: sample_contiguous(MODEL, [1], 2, seed=-1), VALUE, "seed"),
    ("sample request 1.0", lambda: sample_contiguous(MODEL, [1], 2, request=1.0), KIND, "request"),
    # TinyLlama(config, seed, init_std), forward, hidden, from_state_dict
    ("init seed -1", lambda: TinyLlama(TINY, seed=-1), VALUE, "seed must be >= 0"),
    ("init std 0", lambda: TinyLlama(TINY, init_std=0), VALUE, "init_std"),
    ("init std nan", lambda: TinyLlama(TINY, init_std=math.nan), VALUE, "nan"),
    ("init std bool", lambda: TinyLlama(TINY, init_std=True), KIND, "True"),
    ("init std str", lambda: TinyLlama(TINY, init_std="0.1"), KIND, "0.1"),
    ("forward float ids", lambda: MODEL(IDS.float()), KIND, "torch.float32"),
    ("forward int16 ids", lambda: MODEL(IDS.short()), KIND, "torch.int16"),
    ("forward bool ids", lambda: MODEL(IDS.bool()), KIND, "torch.bool"),
    ("forward list", lambda: MODEL([[1, 2]]), KIND, "list"),
    ("forward 1-D", lambda: MODEL(IDS[0]), VALUE, "(3,)"),
    ("forward id 64", lambda: MODEL(torch.tensor([[1, 64]])), VALUE, "64"),
    ("forward id -2", lambda: MODEL(torch.tensor([[-2, 1]])), VALUE, "-2"),
    ("forward no batch", lambda: MODEL(torch.zeros(0, 3, dtype=torch.long)), VALUE, "(0, 3)"),
    ("forward too long", lambda: MODEL(torch.ones(1, 257, dtype=torch.long)), VALUE, "257"),
    ("forward meta", lambda: MODEL(IDS.to("meta")), VALUE, "meta"),
    ("hidden 2-D ids", lambda: MODEL.hidden(IDS, *GOOD_HIDDEN[1:]), VALUE, "(1, 3)"),
    ("hidden id 70", lambda: MODEL.hidden(torch.tensor([1, 70, 2]), *GOOD_HIDDEN[1:]), VALUE, "70"),
    (
        "hidden positions count",
        lambda: MODEL.hidden(GOOD_HIDDEN[0], torch.arange(2), GOOD_HIDDEN[2]),
        VALUE,
        "(2,)",
    ),
    (
        "hidden positions float",
        lambda: MODEL.hidden(GOOD_HIDDEN[0], torch.arange(3.0), GOOD_HIDDEN[2]),
        KIND,
        "torch.float32",
    ),
    (
        "hidden position 256",
        lambda: MODEL.hidden(GOOD_HIDDEN[0], torch.tensor([0, 1, 256]), GOOD_HIDDEN[2]),
        VALUE,
        "256",
    ),
    ("hidden no store", lambda: MODEL.hidden(*GOOD_HIDDEN[:2], None), KIND, "NoneType"),
    ("weights list", lambda: TinyLlama.from_state_dict(TINY, []), KIND, "list"),
    (
        "weights not tensors",
        lambda: TinyLlama.from_state_dict(TINY, {"model.norm.weight": [1.0]}),
        KIND,
        "model.norm.weight",
    ),
    # kv: the attention seam
    ("causal k rows", lambda: causal_attention(*qkv(3, 4), 0), VALUE, "first + len(q) = 3"),
    ("causal first -1", lambda: causal_attention(*qkv(3, 2), -1), VALUE, "-1"),
    ("causal q 2-D", lambda: causal_attention(qkv()[0][0], *qkv()[1:], 0), VALUE, "(4, 8)"),
    ("causal heads", lambda: causal_attention(*qkv(heads=3), 0), VALUE, "(3, 3, 8)"),
    ("causal int q", lambda: causal_attention(qkv()[0].int(), *qkv()[1:], 0), KIND, "int32"),
    ("causal list k", lambda: causal_attention(qkv()[0], [1], qkv()[2], 0), KIND, "list"),
    ("invariant k rows", lambda: invariant_attention(*qkv(3, 5), 1), VALUE, "first + len(q) = 4"),
    ("dense batch 0", lambda: DenseCausal(0, 3), VALUE, "batch must be >= 1, got 0"),
    ("dense length 1.5", lambda: DenseCausal(1, 1.5), KIND, "1.5"),
    ("dense rows", lambda: DenseCausal(2, 2).attend(0, *qkv(3, 3)), VALUE, "batch x length = 4"),
    ("contiguous layers 0", lambda: ContiguousCache(0), VALUE, "num_layers must be >= 1, got 0"),
    ("contiguous flag 1", lambda: ContiguousCache(2, 1), KIND, "batch_invariant"),
    ("contiguous layer 2", lambda: ContiguousCache(2).attend(2, *qkv()), VALUE, "layer"),
    # paged: pieces and steps
    ("piece first -1", lambda: Piece((0,), -1, 1), VALUE, "first must be >= 0, got -1"),
    ("piece count 0", lambda: Piece((0,), 0, 0), VALUE, "count must be >= 1, got 0"),
    ("piece block -1", lambda: Piece((0, -1), 0, 1), VALUE, "blocks[1] must be >= 0, got -1"),
    ("piece list", lambda: Piece([0], 0, 1), KIND, "[0]"),
    ("piece short", lambda: Piece((0,), 3, 2).slots(4), VALUE, "need 2 blocks of 4"),
    ("piece block_size 0", lambda: Piece((0,), 0, 1).read_blocks(0), VALUE, "block_size"),
]


def cache(num_blocks: int = 4, block_size: int = 4) -> PagedKVCache:
    return PagedKVCache(num_blocks, block_size, 2, 8)


STEP_CASES: list[tuple[str, Callable[[list[PagedKVCache]], object], type[Exception], object]] = [
    ("step no caches", lambda c: PagedStep([], [Piece((0,), 0, 1)]), VALUE, "[]"),
    ("step caches dict", lambda c: PagedStep({}, [Piece((0,), 0, 1)]), KIND, "{}"),
    ("step not a cache", lambda c: PagedStep([c[0], 3], [Piece((0,), 0, 1)]), KIND, "caches[1]"),
    (
        "step caches differ",
        lambda c: PagedStep([c[0], cache(4, 2)], [Piece((0,), 0, 1)]),
        VALUE,
        "caches[1]",
    ),
    ("step no pieces", lambda c: PagedStep(c, []), VALUE, "pieces"),
    ("step block 9", lambda c: PagedStep(c, [Piece((9,), 0, 1)]), VALUE, "9"),
    ("step short piece", lambda c: PagedStep(c, [Piece((0,), 0, 5)]), VALUE, "need 2 blocks"),
    (
        "step attention 5",
        lambda c: PagedStep(c, [Piece((0,), 0, 1)], decode_attention=5),
        KIND,
        "5",
    ),
    ("step flag 1", lambda c: PagedStep(c, [Piece((0,), 0, 1)], None, 1), KIND, "batch_invariant"),
    (
        "step attend layer 2",
        lambda c: PagedStep(c, [Piece((0,), 0, 1)]).attend(2, *qkv(1, 1)),
        VALUE,
        "layer",
    ),
    (
        "step attend rows",
        lambda c: PagedStep(c, [Piece((0,), 0, 1)]).attend(0, *qkv(2, 2)),
        VALUE,
        "the step 1 tokens",
    ),
    (
        "step attend heads",
        lambda c: PagedStep(c, [Piece((0,), 0, 1)]).attend(0, *qkv(1, 1, heads=4, kv_heads=4)),
        VALUE,
        "(4, 8)",
    ),
]

OTHER_CASES: list[tuple[str, Callable[[], object], type[Exception], object]] = [
    # sampling
    ("seed -1", lambda: sample_seed(-1, 0, 0), VALUE, "seed must be >= 0, got -1"),
    ("generator request 1.5", lambda: sample_generator(0, 1.5, 0), KIND, "1.5"),
    ("draw int logits", lambda: draw(torch.tensor([1, 2]), None, 1.0), KIND, "torch.int64"),
    ("draw 2-D logits", lambda: draw(torch.zeros(2, 3), None, 1.0), VALUE, "(2, 3)"),
    ("draw empty logits", lambda: draw(torch.zeros(0), None, 1.0), VALUE, "(0,)"),
    ("draw list logits", lambda: draw([1.0, 2.0], None, 1.0), KIND, "list"),
    ("draw generator", lambda: draw(torch.zeros(3), "gen", 1.0), KIND, "gen"),
    ("draw temperature", lambda: draw(torch.zeros(3), None, -0.5), VALUE, "-0.5"),
    # agreement
    ("divergence lengths", lambda: first_divergence(MODEL, [1], [1, 2], [1]), VALUE, "2 and 1"),
    ("divergence prompt", lambda: first_divergence(MODEL, [], [1], [1]), VALUE, "[]"),
    ("divergence id 64", lambda: first_divergence(MODEL, [1], [64], [1]), VALUE, "64"),
    ("divergence model", lambda: first_divergence("m", [1], [1], [1]), KIND, "str"),
    ("logits no prompts", lambda: last_logits(MODEL, []), VALUE, "[]"),
    ("logits str prompts", lambda: last_logits(MODEL, "12"), KIND, "12"),
    ("logits id 64", lambda: last_logits(MODEL, [[1], [1, 64]]), VALUE, "prompts[1][1]"),
    ("hidden flag", lambda: last_hidden(MODEL, [[1]], batch_invariant=1), KIND, "batch_invariant"),
    ("segments 0", lambda: Segments([3, 0]), VALUE, "lengths[1] must be >= 1, got 0"),
    ("segments none", lambda: Segments([]), VALUE, "[]"),
    ("segments rows", lambda: Segments([2]).attend(0, *qkv(3, 3)), VALUE, "the segments 2"),
    # smollm2 (nothing here needs the model's file)
    ("pretrained cache", lambda: pretrained(cache="yes"), KIND, "yes"),
    ("cache_entry str", lambda: cache_entry("x.gguf"), KIND, "str"),
    ("chat empty", lambda: chat_prompt(object(), "  "), VALUE, "'  '"),
    ("chat not str", lambda: chat_prompt(object(), 5), KIND, "5"),
    ("chat tokenizer", lambda: chat_prompt(object(), "hi"), KIND, "object"),
    ("greedy model", lambda: transformers_greedy(None, [[1]], 2, 0), KIND, "NoneType"),
    ("greedy prompts", lambda: transformers_greedy(MODEL_LIKE, [], 2, 0), VALUE, "[]"),
    ("greedy a prompt", lambda: transformers_greedy(MODEL_LIKE, [[1], []], 2, 0), VALUE, "[]"),
    ("greedy one list", lambda: transformers_greedy(MODEL_LIKE, [1], 2, 0), KIND, "prompts[0]"),
    ("greedy max_new", lambda: transformers_greedy(MODEL_LIKE, [[1]], 0, 0), VALUE, "got 0"),
    ("greedy pad", lambda: transformers_greedy(MODEL_LIKE, [[1]], 2, -1), VALUE, "pad"),
    # layers
    ("project linear", lambda: project(None, torch.zeros(2, 32)), KIND, "NoneType"),
    ("project width", lambda: project(MODEL.lm_head, torch.zeros(2, 31)), VALUE, "(2, 31)"),
    ("project 3-D", lambda: project(MODEL.lm_head, torch.zeros(1, 2, 32)), VALUE, "(1, 2, 32)"),
    ("project flag", lambda: project(MODEL.lm_head, torch.zeros(2, 32), 1), KIND, "1"),
    ("rotary float", lambda: rotary(torch.arange(3.0), 8, 1e4), KIND, "torch.float32"),
    ("rotary odd dim", lambda: rotary(torch.arange(3), 7, 1e4), VALUE, "7"),
    ("rotary theta", lambda: rotary(torch.arange(3), 8, -1.0), VALUE, "-1.0"),
    (
        "apply cos shape",
        lambda: apply_rotary(*qkv()[:1], *rotary(torch.arange(2), 8, 1e4)),
        VALUE,
        "(2, 8)",
    ),
    ("norm size 0", lambda: RMSNorm(0, 1e-6), VALUE, "size must be >= 1, got 0"),
    ("norm eps", lambda: RMSNorm(4, 0.0), VALUE, "eps"),
    ("norm input", lambda: RMSNorm(4, 1e-6)(torch.zeros(2, 5)), VALUE, "(2, 5)"),
    ("attention heads", lambda: Attention(30, 4, 2, 1e4), VALUE, "30"),
    ("attention kv", lambda: Attention(32, 4, 3, 1e4), VALUE, "kv_heads (3)"),
    ("mlp size", lambda: MLP(32, 0), VALUE, "intermediate must be >= 1, got 0"),
    (
        "layer store",
        lambda: MODEL.model.layers[0](torch.zeros(2, 32), COS_SIN, None, 0),
        KIND,
        "NoneType",
    ),
    (
        "layer -1",
        lambda: MODEL.model.layers[0](torch.zeros(2, 32), COS_SIN, STORE, -1),
        VALUE,
        "-1",
    ),
    ("layer config", lambda: DecoderLayer({**TINY, "hidden_size": 30}), VALUE, "hidden_size"),
    # gguf_file
    ("hf_name int", lambda: hf_name(5), KIND, "int"),
    ("unpermute rows", lambda: unpermute_rows(np.zeros((6, 4)), 2), VALUE, "6 rows"),
    ("unpermute list", lambda: unpermute_rows([[1.0]], 1), KIND, "list"),
    ("unpermute heads", lambda: unpermute_rows(np.zeros((8, 4)), 0), VALUE, "heads"),
    ("unpermute 1-D", lambda: unpermute_rows(np.zeros(8), 2), VALUE, "(8,)"),
    ("read path int", lambda: read_llama_gguf(5), KIND, "int"),
    ("read no file", lambda: read_llama_gguf("/no/such.gguf"), VALUE, "/no/such.gguf"),
    ("reader None", lambda: llama_config_from_gguf(None), KIND, "NoneType"),
]


COS_SIN = rotary(torch.arange(2), 8, 1e4)
STORE = DenseCausal(1, 2)


class _Generates:
    """A stand-in for a transformers model: its generate must never be reached."""

    def generate(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("generate ran on refused input")


MODEL_LIKE = _Generates()


@pytest.mark.parametrize(("label", "call", "kind", "named"), CASES, ids=[c[0] for c in CASES])
def test_bad_model_calls_are_refused_naming_the_value(label, call, kind, named) -> None:  # type: ignore[no-untyped-def]
    error = refuses(call, kind, naming=named, state=weights)
    if kind is VALUE:
        assert not isinstance(error, TypeError), f"a wrong value, reported as a wrong kind: {error}"


@pytest.mark.parametrize(
    ("label", "call", "kind", "named"), STEP_CASES, ids=[c[0] for c in STEP_CASES]
)
def test_bad_paged_steps_are_refused_and_the_pages_unchanged(label, call, kind, named) -> None:  # type: ignore[no-untyped-def]
    caches = [cache(), cache()]
    for c in caches:
        c.key.normal_()
    pages = lambda: [c.key.numpy().tobytes() for c in caches]  # noqa: E731
    error = refuses(lambda: call(caches), kind, naming=named, state=pages)
    if kind is VALUE:
        assert not isinstance(error, TypeError), str(error)


@pytest.mark.parametrize(
    ("label", "call", "kind", "named"), OTHER_CASES, ids=[c[0] for c in OTHER_CASES]
)
def test_other_bad_calls_are_refused_naming_the_value(label, call, kind, named) -> None:  # type: ignore[no-untyped-def]
    error = refuses(call, kind, naming=named)
    if kind is VALUE:
        assert not isinstance(error, TypeError), str(error)


def test_a_refused_attend_leaves_a_contiguous_cache_as_it_was() -> None:
    store = ContiguousCache(1)
    q, k, v = qkv(2, 2)
    store.attend(0, q, k, v)
    held = lambda: (store.num_tokens, store.keys[0].tolist())  # noqa: E731
    refuses(lambda: store.attend(0, q, k.double(), v.double()), naming="torch.float64", state=held)
    refuses(lambda: store.attend(0, q, k[:1], v[:1]), naming="first + len(q) = 2", state=held)


def test_refused_weights_leave_the_callers_mapping_and_tensors_as_they_were() -> None:
    model = TinyLlama({**TINY, "tie_word_embeddings": True}, seed=1)
    given = {k: v.clone() for k, v in model.state_dict().items()}
    given["lm_head.weight"] = torch.zeros_like(given["lm_head.weight"])  # not the embeddings
    keys = lambda: (sorted(given), float(given["lm_head.weight"].abs().sum()))  # noqa: E731
    refuses(lambda: TinyLlama.from_state_dict(model.config, given), match="must equal", state=keys)


@pytest.mark.parametrize("tied", [False, True])
def test_parameter_shapes_are_the_models(tied: bool) -> None:
    """The guard's expected shapes are exactly the parameters the model builds."""
    model = TinyLlama({**TINY, "tie_word_embeddings": tied})
    built = {n: tuple(p.shape) for n, p in model.named_parameters(remove_duplicate=not tied)}
    if tied:
        del built["lm_head.weight"]
    assert parameter_shapes(model.config) == built


def test_good_input_is_not_refused() -> None:
    """What the guards let through: numpy and 0-d torch integers, int32 ids, both devices."""
    assert generate_contiguous(MODEL, [np.int64(1), torch.tensor(5)], 2) == generate_contiguous(
        MODEL, [1, 5], 2
    )
    with torch.no_grad():
        assert torch.equal(MODEL(IDS.int()), MODEL(IDS))
    assert draw(torch.tensor([0.0, 1.0]), None, 0) == 1


# -- one guard first, in every public function and method ------------------------------------
GUARDED = [agreement, generate_module, gguf_file, kv, layers, llama, paged, sampling, smollm2]
"""Every module of pagedlab.model that takes input (LlamaConfig.from_hf is the config's
validator; checks.py holds the checks)."""


def _public_functions() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for module in GUARDED:
        tree = ast.parse(Path(inspect.getfile(module)).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith(("_", "check_")):
                found.append((f"{module.__name__}.{node.name}", node))
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                if any(getattr(b, "id", "") == "Protocol" for b in node.bases):
                    continue
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and (
                        not item.name.startswith("_") or item.name in ("__init__", "__post_init__")
                    ):
                        found.append((f"{module.__name__}.{node.name}.{item.name}", item))
    return found


def _takes_arguments(fn: ast.FunctionDef) -> bool:
    names = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
    return bool([n for n in names if n not in ("self", "cls")]) or fn.name == "__post_init__"


def _first_call(fn: ast.FunctionDef) -> str:
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(
        fn.body[0].value, ast.Constant
    ) else fn.body  # fmt: skip
    statement = body[0]
    value = statement.value if isinstance(statement, (ast.Expr, ast.Assign)) else None
    if not isinstance(value, ast.Call):
        return ""
    func = value.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


FUNCTIONS = [(name, fn) for name, fn in _public_functions() if _takes_arguments(fn)]


@pytest.mark.parametrize(("name", "fn"), FUNCTIONS, ids=[name for name, _ in FUNCTIONS])
def test_every_public_function_starts_with_one_guard(name: str, fn: ast.FunctionDef) -> None:
    first = _first_call(fn)
    assert first.startswith(("_check", "check_")), f"{name} starts with {first or 'no call'}"


def test_the_guard_list_covers_the_modules_that_take_input() -> None:
    assert len(FUNCTIONS) >= 30, [name for name, _ in FUNCTIONS]
