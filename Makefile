# Two commands for a fresh machine with Python 3.11+ and pip:
#   make lab    set everything up, then open JupyterLab on notebooks/ (127.0.0.1, token auth on)
#   make test   set everything up, then lint, type-check, check the layering (lint-imports)
#               and dead code (vulture), and run every test and notebook
# Both build .venv once and reuse it until pyproject.toml or constraints.txt change.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.pagedlab-installed

.PHONY: lab test notebooks figures bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[lab,test]'
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter trust notebooks/*.ipynb
	$(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks

test: $(STAMP)
	$(BIN)/ruff check pagedlab tests benchmarks scripts
	$(BIN)/ruff format --check pagedlab tests benchmarks scripts
	$(BIN)/mypy pagedlab
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_dead_code.py
	@# pytest exits 5 when it collected nothing: a broken layout, never a pass.
	$(BIN)/python -m pytest; status=$$?; \
	  if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; exit $$status

# Re-execute every notebook in place after a change to pagedlab (deterministic outputs).
notebooks: $(STAMP)
	$(BIN)/python scripts/execute_notebooks.py notebooks/*.ipynb

figures: $(STAMP)
	$(BIN)/python -m pagedlab.figures

bench: $(STAMP)
	for script in benchmarks/bench_*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build
