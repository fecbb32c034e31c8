# recnotebooks: `make lab` opens the notebooks, `make test` runs every test.
# Both create .venv on first use and are quick on later runs (a stamp file tracks
# pyproject.toml). Override the Python or the torch build, e.g.
#   make test PYTHON=python3.12 TORCH_SPEC="torch==2.13.0"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PORT ?= 8888
PY := $(VENV)/bin/python
# Jupyter refuses to run as root (containers, some lab machines) unless told it may.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--ServerApp.allow_root=True,)
STAMP := $(VENV)/.recnotebooks-installed

.PHONY: lab test lint bench setup clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, so a loose requirement never pulls a multi-GB build by accident.
$(STAMP): $(PY) pyproject.toml
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[lab,test]"
	touch $(STAMP)

setup: $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
		--ServerApp.root_dir=notebooks --ServerApp.open_browser=True $(ALLOW_ROOT)

lint: $(STAMP)
	$(PY) -m ruff check recnotebooks tests benchmarks datasets notebooks

test: $(STAMP) lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/train_throughput.py

clean-venv:
	rm -rf $(VENV)
