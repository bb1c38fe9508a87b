# make test   -- install into .venv if needed, then run the test suite
# make demo   -- install into .venv if needed, then run the main job
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test test-fast demo bench-select bench-prefill clean

setup: $(STAMP)

# Re-installs only when the dependency lists change; safe to run again.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test]"
	$(BIN)/python -c "import torch, torchvision, transformers, vcast; print('vcast', vcast.__version__, '| torch', torch.__version__, '| torchvision', torchvision.__version__, '| transformers', transformers.__version__)"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

demo: $(STAMP)
	$(BIN)/python -m vcast.demo

bench-select: $(STAMP)
	$(BIN)/python scripts/bench_select.py

bench-prefill: $(STAMP)
	$(BIN)/python scripts/bench_prefill.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
