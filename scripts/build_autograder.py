"""``make autograder``: write autograder.zip, the Gradescope bundle (README, "For instructors").

At its root: ``setup.sh`` and ``run_autograder`` (scripts/autograder/), then what setup.sh
installs: ``pyproject.toml``, ``README.md``, ``constraints.txt`` (every version pinned) and the
``pagedlab`` package (no caches). Entries are sorted and dated 1980-01-01: the same tree gives
the same zip, byte for byte.
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("setup.sh", "run_autograder")
FILES = ("pyproject.toml", "README.md", "constraints.txt")


def entries() -> list[tuple[str, Path]]:
    """(name in the zip, file here), in the zip's order."""
    found = [(name, ROOT / "scripts" / "autograder" / name) for name in SCRIPTS]
    found += [(name, ROOT / name) for name in FILES]
    package = sorted(
        p for p in (ROOT / "pagedlab").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )  # fmt: skip
    return found + [(p.relative_to(ROOT).as_posix(), p) for p in package]


def build(out: Path) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, path in entries():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            mode = 0o755 if name in SCRIPTS else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, path.read_bytes())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "autograder.zip")
    out = build(parser.parse_args().out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): upload it as a Gradescope autograder")


if __name__ == "__main__":
    main()
