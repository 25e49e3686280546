"""python -m pagedlab.figures writes its files, deterministically and small."""

from __future__ import annotations

from pathlib import Path

from pagedlab.figures import FILES, NOTEBOOK_FILES, main, write_notebook_figures


def test_figures_command_writes_files(tmp_path: Path) -> None:
    assert main([str(tmp_path / "a")]) == 0
    first = {name: (tmp_path / "a" / name).read_bytes() for name in FILES}
    for name, data in first.items():
        assert data[:4] in (b"\x89PNG", b"GIF8"), name
        assert len(data) < 400_000, name
    main([str(tmp_path / "b")])
    assert first == {name: (tmp_path / "b" / name).read_bytes() for name in FILES}


def test_notebook_figures_are_written_small(tmp_path: Path) -> None:
    paths = write_notebook_figures(tmp_path)
    assert [p.name for p in paths] == list(NOTEBOOK_FILES)
    for path in paths:
        data = path.read_bytes()
        assert data[:4] == b"\x89PNG" and 2_000 < len(data) < 400_000, path.name
