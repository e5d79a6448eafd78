# Two commands on a fresh Debian machine: `make demo` and `make test` (each does all set-up).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.skelpy-installed

.PHONY: setup demo test test-mpi lint bench examples clean

setup: $(STAMP)
	@bash scripts/setup-opencl.sh

$(STAMP): pyproject.toml
	@bash scripts/setup-opencl.sh
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	    echo "creating the venv failed; installing python3-venv"; \
	    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plot,mpi]' ruff
	@touch $(STAMP)

demo: setup
	$(PY) examples/demo.py

test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile
	@$(MAKE) --no-print-directory test-mpi

# the skeletons under MPI, one PoCL CPU device per rank; `timeout` turns a hang into a failure
MPIEXEC := $(VENV)/bin/mpiexec --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
test-mpi: setup
	timeout 300 $(MPIEXEC) -n 2 $(PY) tests/mpi/run.py
	timeout 300 $(MPIEXEC) -n 3 $(PY) tests/mpi/run.py

lint: setup
	$(VENV)/bin/ruff check skelpy tests examples benchmarks

bench: setup
	$(VENV)/bin/skelpy bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
