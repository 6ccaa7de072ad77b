# sandbox-kernel: `make demo` runs the quickstart notebook in a sandbox; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,test]'
	$(VENV)/bin/sandbox-kernel install --sys-prefix
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py notebooks/quickstart.ipynb build/

test: $(STAMP)
	$(VENV)/bin/sandbox-kernel install --sys-prefix >/dev/null
	$(PY) -m pytest -p nbval tests notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf build $(VENV)
