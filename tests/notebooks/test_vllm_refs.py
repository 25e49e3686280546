"""pagedlab.ground.vllm_refs: every vLLM file and PR a notebook names is listed once; every V1
statement points at lines of the vLLM 0.34.0 wheel's file, and those names are in the installed
copy."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from pagedlab.ground import vllm_refs

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
PATH = re.compile(r"\b((?:vllm|csrc)/[\w/]+\.(?:py|cu|cuh))\b")
PR = re.compile(r"(?:PR|PRs|pull request)s?\s+#?(\d{4,6})|#(\d{5})\b")
HEX40 = re.compile(r"[0-9a-f]{40}")


def notebook_text() -> str:
    return "\n".join(c.source for nb in NOTEBOOKS for c in nbformat.read(nb, 4).cells)


def test_v1_entries_point_at_the_wheel_and_the_rest_at_a_commit() -> None:
    for key, r in vllm_refs.REFS.items():
        assert r.engine in vllm_refs.ENGINES and r.names and r.read.strip(), key
        if r.engine == "V1":
            assert r.lines and not r.commit and r.short == "0.34.0", key
            assert re.fullmatch(r"\d+(-\d+)?(, \d+(-\d+)?)*", r.lines), (key, r.lines)
        else:
            assert HEX40.fullmatch(r.commit) and not r.lines, key
        assert not r.first_read or HEX40.fullmatch(r.first_read), key
    paths = [r.path for r in vllm_refs.REFS.values()]
    assert len(paths) == len(set(paths)), "a file is listed once"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
def test_every_v1_name_and_line_is_in_the_installed_0_34_0_files() -> None:
    from importlib.metadata import version

    assert version("vllm") == "0.34.0"
    root = Path(importlib.util.find_spec("vllm").origin).parent.parent  # type: ignore[union-attr]
    for key, r in vllm_refs.REFS.items():
        if r.engine != "V1":
            assert not (root / r.path).exists() or r.engine == "kernel", (key, "in the wheel")
            continue
        text = (root / r.path).read_text()
        last = max(int(n) for n in re.findall(r"\d+", r.lines))
        assert last <= text.count("\n") + 1, (key, last)
        for name in r.names:
            assert name.split(".")[-1] in text, (key, name)


def test_every_vllm_file_a_notebook_names_is_listed() -> None:
    pinned = {r.path for r in vllm_refs.REFS.values()}
    named = set(PATH.findall(notebook_text()))
    assert named, "the notebooks name vLLM files"
    assert named <= pinned, sorted(named - pinned)


def test_every_pull_request_and_issue_a_notebook_names_is_listed() -> None:
    text = notebook_text()
    named = {int(a or b) for a, b in PR.findall(text)}
    listed = set(vllm_refs.PULL_REQUESTS) | set(vllm_refs.ISSUES)
    assert named <= listed, sorted(named - listed)
    issues = {int(n) for n in re.findall(r"vLLM issue #?(\d{4,6})", text)}
    assert issues <= set(vllm_refs.ISSUES), sorted(issues - set(vllm_refs.ISSUES))


def test_every_listed_file_is_named_somewhere_but_the_gone_ones() -> None:
    text = notebook_text()
    unused = [r.path for r in vllm_refs.REFS.values() if r.path not in text and r.engine != "gone"]
    assert not unused, unused


def test_statement_and_table() -> None:
    assert vllm_refs.statement("block_pool").startswith(
        "As of vLLM 0.34.0, `vllm/v1/core/block_pool.py:47-51"
    )
    assert vllm_refs.statement("v0_scheduler").startswith(
        "As of vLLM `0dce2b2` (V0, not in the 0.34.0 wheel), `vllm/core/scheduler.py`:"
    )
    table = vllm_refs.table()
    assert all(r.where in table and f"`{r.short}`" in table for r in vllm_refs.REFS.values())
    assert all(f"#{n}" in table for n in vllm_refs.PULL_REQUESTS)
    for key in vllm_refs.REFS:
        assert vllm_refs.statement(key).startswith("As of vLLM ")
    for text in (*vllm_refs.REFS.values(), *vllm_refs.ISSUES.values()):
        assert "reported" not in repr(text) and "not read" not in repr(text)
    with pytest.raises(KeyError, match="block_pool"):
        vllm_refs.ref("blockpool")


def test_every_cell_naming_a_vllm_file_says_as_of_which_version() -> None:
    shorts = {s for r in vllm_refs.REFS.values() for s in r.shorts} | {vllm_refs.VLLM_COMMIT}
    for nb in NOTEBOOKS:
        for cell in nbformat.read(nb, 4).cells:
            if cell.cell_type != "markdown" or not PATH.search(cell.source):
                continue
            commits = set(re.findall(r"`([0-9a-f]{7})`", cell.source))
            assert commits <= shorts, (nb.name, cell.id, sorted(commits - shorts))
            assert commits or "0.34" in cell.source, (nb.name, cell.id, "names no version")


def test_hugging_face_refs_name_files_and_names_of_the_installed_transformers() -> None:
    transformers = pytest.importorskip("transformers")
    assert transformers.__version__ == "5.24.0"
    root = Path(transformers.__file__).parent / "generation" / "continuous_batching"
    for key, h in vllm_refs.HF_REFS.items():
        text = (root / h.path).read_text()
        for name in h.names:
            assert name.split(".")[-1] in text, (key, name)
        assert vllm_refs.hf_statement(key).startswith("As of transformers 5.24.0")


def test_the_release_commit_is_the_installed_wheels() -> None:
    version = pytest.importorskip("vllm._version")
    assert version.__version__ == vllm_refs.VLLM_RELEASE
    assert version.commit_id.lstrip("g").startswith(vllm_refs.VLLM_COMMIT)
