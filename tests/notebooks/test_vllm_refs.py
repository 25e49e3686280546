"""pagedlab.vllm_refs: every vLLM file and PR a notebook names is pinned, once, to a commit."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from pagedlab import vllm_refs

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
PATH = re.compile(r"\b((?:vllm|csrc)/[\w/]+\.(?:py|cu|cuh))\b")
PR = re.compile(r"(?:PR|PRs|pull request)s?\s+#?(\d{4,6})|#(\d{5})\b")


def notebook_text() -> str:
    return "\n".join(c.source for nb in NOTEBOOKS for c in nbformat.read(nb, 4).cells)


def test_every_entry_is_pinned_to_a_full_commit_and_says_what_it_read() -> None:
    assert vllm_refs.REFS
    for key, r in vllm_refs.REFS.items():
        assert re.fullmatch(r"[0-9a-f]{40}", r.commit), key
        assert r.names and r.read.strip() and r.engine in {"V1", "V0", "kernel"}
        assert r.short == r.commit[:7]
    paths = [r.path for r in vllm_refs.REFS.values()]
    assert len(paths) == len(set(paths)), "a file is listed once"


def test_every_vllm_file_a_notebook_names_is_pinned() -> None:
    pinned = {r.path for r in vllm_refs.REFS.values()}
    named = set(PATH.findall(notebook_text()))
    assert named, "the notebooks name vLLM files"
    assert named <= pinned, sorted(named - pinned)


def test_every_pull_request_a_notebook_names_is_listed() -> None:
    named = {int(a or b) for a, b in PR.findall(notebook_text())}
    assert named <= set(vllm_refs.PULL_REQUESTS), sorted(named - set(vllm_refs.PULL_REQUESTS))


def test_every_pinned_file_is_named_somewhere() -> None:
    text = notebook_text()
    unused = [r.path for r in vllm_refs.REFS.values() if r.path not in text]
    assert not unused, unused


def test_as_of_and_table() -> None:
    assert vllm_refs.as_of("block_pool") == (
        "`vllm/v1/core/block_pool.py` as of vLLM 0.33.0 (`4ba787e`)"
    )
    assert vllm_refs.as_of("scheduler") == "`vllm/v1/core/sched/scheduler.py` as of vLLM `b4622cf`"
    table = vllm_refs.table()
    assert all(r.short in table and r.path in table for r in vllm_refs.REFS.values())
    assert all(f"as of `{r.short}`" in table for r in vllm_refs.REFS.values())
    assert all(f"#{n}" in table for n in vllm_refs.PULL_REQUESTS)
    with pytest.raises(KeyError, match="block_pool"):
        vllm_refs.ref("blockpool")


def test_every_cell_naming_a_vllm_file_says_as_of_which_commit() -> None:
    shorts = {s for r in vllm_refs.REFS.values() for s in r.shorts}
    for nb in NOTEBOOKS:
        for cell in nbformat.read(nb, 4).cells:
            if cell.cell_type != "markdown" or not PATH.search(cell.source):
                continue
            commits = set(re.findall(r"`([0-9a-f]{7})`", cell.source))
            assert commits <= shorts, (nb.name, cell.id, sorted(commits - shorts))
            assert commits, (nb.name, cell.id, "names a vLLM file but no pinned commit")


def test_every_re_pin_says_what_changed_as_of_0_33_and_what_was_read() -> None:
    repinned = [r for r in vllm_refs.REFS.values() if r.repin]
    assert {"block_pool", "single_type_kv_cache_manager", "cache_config"} <= {
        k for k, r in vllm_refs.REFS.items() if r.repin
    }
    for r in repinned:
        assert r.repin is not None
        assert r.repin.release == "0.33.0" and r.repin.short == "4ba787e"
        assert r.repin.names and r.repin.read.strip() and r.repin.source.strip()
    for key in vllm_refs.REFS:
        assert all(line.startswith("As of ") for line in vllm_refs.statement(key).splitlines())


def test_every_vllm_issue_a_notebook_names_is_listed() -> None:
    named = {int(n) for n in re.findall(r"vLLM issue (\d{4,6})", notebook_text())}
    assert named <= set(vllm_refs.ISSUES), sorted(named - set(vllm_refs.ISSUES))


def test_hugging_face_refs_name_files_and_names_of_the_installed_transformers() -> None:
    transformers = pytest.importorskip("transformers")
    assert transformers.__version__ == "5.24.0"
    root = Path(transformers.__file__).parent / "generation" / "continuous_batching"
    for key, h in vllm_refs.HF_REFS.items():
        text = (root / h.path).read_text()
        for name in h.names:
            assert name.split(".")[-1] in text, (key, name)
        assert vllm_refs.hf_statement(key).startswith("As of transformers 5.24.0")
