# One entry point for humans and CI. Everything bootstraps .venv itself.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
SHARED  ?= ../shared

.PHONY: demo test check lint typecheck contracts structure proto bench sim clean docker-setup describe-extra

# Installs print a line per step and, while pip is quiet, one every 15 s (scripts/pip_progress.py).
INSTALL := $(BIN)/python scripts/pip_progress.py

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@echo "make: installing Horus and its development tools into $(VENV) (a minute or two the first time)"
	$(INSTALL) --upgrade pip
	$(INSTALL) -e '.[dev]'
	touch $(STAMP)

# The describe extra (model cards) with CPU builds of torch: newer versions on PyPI pull CUDA
# builds of several GB. Pinned first, then the extra (which accepts them).
TORCH_PINS ?= torch==2.13.0 torchvision==0.28.0
describe-extra: $(STAMP)  ## install torch (CPU) and the describe extra into .venv
	@echo "make: installing $(TORCH_PINS) (CPU builds, about a GB unpacked: a minute or two)"
	$(INSTALL) $(TORCH_PINS)
	$(INSTALL) -e '.[dev,describe]'

demo: $(STAMP)  ## run an embedded cluster (master + 2 workers x 4 simulated GPUs) on a sample workload
	$(BIN)/python scripts/demo.py

test: $(STAMP)  ## the whole test suite (lint, types and import contracts included)
	$(MAKE) check
	$(BIN)/python -m pytest -q -ra

check: lint typecheck contracts structure  ## static checks only

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

structure: $(STAMP)  ## the policy core's structure rules (scripts/check_structure.py)
	$(BIN)/python scripts/check_structure.py

proto: $(STAMP)  ## regenerate horus_core/gen from proto/
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python scripts/gen_proto.py

bench: $(STAMP)  ## benchmarks (JSON lines); not part of the tests
	$(BIN)/python bench/placement.py
	$(BIN)/python bench/submit.py
	$(BIN)/python bench/sim_scale.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/cli_startup.py

sim: $(STAMP)  ## compare policies on Gavel's 2869ce_cap trace, 16 V100 (no speed floor, as the published systems; the default floor's cost: docs/sharing.md)
	$(BIN)/horus-sim --trace horus_core/data/traces/msr_seed0_2869ce_cap.trace --cluster v100:16 --policies fifo,binpack,gandiva,lucid,horus-util,horus,gavel-las-packed --min-speed 0 --out runs/sim

docker-setup:  ## install and start a local Docker engine + the offline test image (root, Debian)
	bash scripts/docker-test-setup.sh

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache runs
