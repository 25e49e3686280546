"""Dead code in pagedlab/: names nothing uses, found by vulture (``make test`` runs this).

Uses count from everywhere code lives: the package, tests, scripts, benchmarks and the code
cells of every notebook (extracted to a temporary folder, since vulture reads only .py). Only
findings inside pagedlab/ are reported: tests are full of names that pytest and hypothesis
call by convention. Names that are used but look unused (an IPython display hook, a widget
link kept alive, result fields a reader inspects) are listed in scripts/vulture_whitelist.py.

Run: python scripts/check_dead_code.py   (exit status 1 if anything is reported)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def notebook_code(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    lines = [
        line
        for cell in cells
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if not line.lstrip().startswith(("%", "!"))  # IPython magics are not Python
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
            (Path(tmp) / f"{notebook.stem}.py").write_text(notebook_code(notebook))
        paths = ["pagedlab", "tests", "scripts", "benchmarks", tmp]  # the whitelist is in scripts/
        vulture = Path(sys.executable).with_name("vulture")
        result = subprocess.run(
            [str(vulture), *paths, "--min-confidence", "60"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode not in (0, 3):  # 3: dead code found; anything else: vulture failed
        print(result.stdout + result.stderr, file=sys.stderr)
        return result.returncode
    found = [line for line in result.stdout.splitlines() if line.startswith("pagedlab/")]
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} unused name(s) in pagedlab/ (see scripts/check_dead_code.py)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
