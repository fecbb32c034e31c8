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

.PHONY: lab test lint bench peers setup clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, so a loose requirement never pulls a multi-GB build by accident.
$(STAMP): $(PY) pyproject.toml
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[lab,test,yambda]"
	touch $(STAMP)

setup: $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) \
		--ServerApp.root_dir=notebooks --ServerApp.open_browser=True $(ALLOW_ROOT)

lint: $(STAMP)
	$(PY) -m ruff check recnotebooks tests benchmarks datasets notebooks
	$(PY) -m ruff format --check recnotebooks tests benchmarks datasets notebooks

test: $(STAMP) lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/train_throughput.py

# Optional peers for comparisons (torchrec interop test, benchmarks/sharded_step_ops.py,
# libCacheSim for tests/test_cache_libcachesim.py and benchmarks/cache.py):
# torchrec's own requirement pulls the CUDA fbgemm-gpu and a new torch, so it goes in
# without dependencies, beside fbgemm's CPU build, with torch held at the installed version.
PEERS := $(VENV)/peers
peers: $(STAMP)
	mkdir -p $(PEERS)
	$(PY) -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > $(PEERS)/constraints.txt
	$(PY) -m pip download --quiet --no-deps --dest $(PEERS) torchrec==1.8.0
	$(PY) -m pip install --quiet --no-deps -c $(PEERS)/constraints.txt $(PEERS)/torchrec-1.8.0-*.whl fbgemm-gpu-cpu==1.8.0
	$(PY) -m pip install --quiet -c $(PEERS)/constraints.txt tensordict "torchmetrics==1.0.3" tqdm pyre-extensions iopath
	$(PY) -c "import torchrec, torch; print('torchrec', torchrec.__version__, 'with torch', torch.__version__)"
	# libCacheSim (C cache simulator; LRU/LFU/Belady cross-check of recnotebooks.cache.simulate)
	$(PY) -m pip install --quiet -c $(PEERS)/constraints.txt "libcachesim==0.3.5"
	$(PY) -c "import libcachesim; print('libcachesim', libcachesim.__version__)"

clean-venv:
	rm -rf $(VENV)
