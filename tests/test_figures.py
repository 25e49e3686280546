"""python -m pagedlab.explorers.figures writes its files, deterministically and small."""

from __future__ import annotations

from pathlib import Path

from pagedlab.explorers.figures import FILES, NOTEBOOK_FILES, main


def test_figures_command_writes_every_file_the_same_twice_and_small(tmp_path: Path) -> None:
    """The README's figures and one picture per notebook: PNG (or GIF), under 400 kB, and
    byte for byte the same on a second run."""
    names = [*FILES, *NOTEBOOK_FILES]
    assert main([str(tmp_path / "a")]) == 0
    first = {name: (tmp_path / "a" / name).read_bytes() for name in names}
    for name, data in first.items():
        assert data[:4] in (b"\x89PNG", b"GIF8"), name
        assert 2_000 < len(data) < 400_000, name
    main([str(tmp_path / "b")])
    assert first == {name: (tmp_path / "b" / name).read_bytes() for name in names}
