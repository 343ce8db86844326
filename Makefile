# `make demo` and `make test` set everything up themselves: a .venv with relaygraph and its
# test extra installed, refreshed whenever pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The demo's BERT has BERT-base's width and sequence length (hidden 768, 12 heads, 128 tokens).
# With a profile already made, the 12 layers took 53-56 s on a 2-core machine (saturation 14-24 s
# as the machine's speed moves, the ILP about 7 s solving the layers part by part, check, timing).
DEMO_LAYERS ?= 12
DEMO_BERT := -O num_layers=$(DEMO_LAYERS) -O hidden=768 -O heads=12 -O seq_len=128

demo: $(STAMP)
	$(BIN)/relaygraph optimize --model bert $(DEMO_BERT)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check relaygraph tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
