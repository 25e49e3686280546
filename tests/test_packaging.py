"""The install files agree with each other: pyproject, constraints.txt and environment.yml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name, where they differ


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def pyproject_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {_name(r) for r in requirements}


def conda_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and dep not in ("python=3.11", "pip"):
            name, _, version = dep.partition("=")
            pins[CONDA_NAMES.get(name, name)] = version
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
