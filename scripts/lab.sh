#!/usr/bin/env bash
# What `make lab` runs: trust the notebooks, then serve notebooks/ with JupyterLab on
# 127.0.0.1 only, with token authentication on (Jupyter's default: a fresh random token,
# printed in the link). Extra arguments go to `jupyter lab` (tests add a port, --no-browser).
#
#   BIN=.venv/bin scripts/lab.sh [jupyter lab arguments...]
#
# As root (containers, many cloud VMs) Jupyter refuses to start unless given --allow-root.
# The flag lifts only that refusal (Jupyter's worry: a root-owned server with a browser
# session); the address and the token stay as they are, so the script adds it there and
# says why in one line. tests/notebooks/test_lab.py runs this script and checks all of it.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-.venv/bin}"
args=(--ip=127.0.0.1 --ServerApp.root_dir=notebooks)
if [ "$(id -u)" -eq 0 ]; then
  echo "lab: running as root (usual in containers and cloud VMs), so adding --allow-root," \
    "without which Jupyter refuses to start; it still listens on 127.0.0.1 only, token required"
  args+=(--allow-root)
fi
# One compute thread per notebook kernel on a 2-core machine (pagedlab/model/threads.py says why)
threads="$("$BIN/python" pagedlab/model/threads.py)"
export $threads
echo "lab: notebook kernels compute with $threads (pagedlab/model/threads.py)"
"$BIN/jupyter" trust notebooks/*.ipynb
exec "$BIN/jupyter" lab "${args[@]}" "$@"
