# The two commands of the README: `make run` (the main job) and `make test`.
# Each creates .venv on first use and installs the project with what it needs.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.agentcredit-installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	@command -v g++ >/dev/null && command -v cmake >/dev/null || { \
	  echo "The ALFWorld engine builds from source: install g++, make and cmake first" \
	       "(Debian/Ubuntu: apt-get install -y g++ make cmake)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[alfworld,tau,report,tensorboard,verl,dev]'
	touch $(STAMP)

# Each `make run` starts a new run directory (runs/embedded-YYYYmmdd-HHMMSS).
run: $(STAMP)
	$(BIN)/agentcredit train run.name=embedded-$$(date +%Y%m%d-%H%M%S)

# The whole suite with the lint gate; `$(BIN)/python -m pytest -m "not slow"` is the fast loop.
test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/alfworld_env.py

clean:
	rm -rf $(VENV) runs .cache
