# sandbox-kernel: `make demo` runs the quickstart notebook in a sandbox (`make demo-docker`: the docker one);
# `make check` runs ruff and the in-process tests (under a minute: before every commit); `make test` runs all tests;
# `make docs` builds the documentation site into build/docs/html.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# pytest-xdist: most of a test's time is spent waiting for engines, browsers and kernels. A group
# (--dist loadgroup) runs on one worker; tests/plugin/tiers.py hands the groups out heaviest first
# (--no-loadscope-reorder keeps that order). TEST_WORKERS=0 runs in this process, one test after the
# other. 2 on this 2-core machine: with 4 the suite took 28-35 minutes at load average 15-30, and
# tests that wait on a browser, a page load or a timing failed (docs/contributing.md, Tests).
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-p xdist -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
CHECK_WORKERS ?= 2
# The project's own bytecode, written before each run. Where PYTHONDONTWRITEBYTECODE is set (these
# machines set it), an editable install's modules were compiled from source by every interpreter that
# imported them: each kernel the tests, the demo or the benchmarks start paid 0.1 s of CPU for it
# (measured: the wrapper's own imports 150 ms from source, 40 ms from bytecode). A wheel's install
# writes bytecode (pip does), so this is what a user's kernel starts from. Incremental: only files
# changed since the last run are compiled again. (benchmarks/run.py compiles them itself.)
BYTECODE = $(PY) -m compileall -q -j 0 sandbox_kernel magics

.PHONY: demo demo-docker check test bench docs screenshots install clean

# pip's and setuptools' output goes to build/install.log, shown only when the install fails
$(STAMP): pyproject.toml
	@mkdir -p build
	@echo "installing sandbox-kernel[all,test,docs] and its kernelspecs into $(VENV) (log: build/install.log)"
	@{ $(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
	   $(PY) -m pip install -q -e '.[all,test,docs]' && $(VENV)/bin/sandbox-kernel install --sys-prefix; } \
	   > build/install.log 2>&1 || { tail -40 build/install.log; exit 1; }
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@$(BYTECODE)
	@$(PY) scripts/demo.py notebooks/quickstart.ipynb build/

# the docker notebook, with the options notebooks/config/docker gives its kernel (needs a Docker
# engine and the sandbox image: bash .ci/docker-setup.sh on Debian)
demo-docker: $(STAMP)
	@$(BYTECODE)
	@JUPYTER_CONFIG_PATH=$(CURDIR)/notebooks/config/docker $(PY) scripts/demo.py notebooks/docker.ipynb build/

# ruff and the in-process tiers: unit (the front doors on the scripted backend are unit tests) and corpus
check: $(STAMP)
	@$(BYTECODE)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -m "unit or corpus" -q -p no:cacheprovider -p xdist -n $(CHECK_WORKERS) $(PYTEST_ARGS)

test: $(STAMP)
	@$(BYTECODE)
	$(VENV)/bin/sandbox-kernel install --sys-prefix >/dev/null
	$(PY) -m pytest -p nbval tests notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider \
	    $(XDIST) $(PYTEST_ARGS)

# the site, from docs/ (MyST pages, and references generated from the code): warnings are errors, so
# a broken link, an option that does not exist or one without help text fails it
docs: $(STAMP)
	$(PY) -m sphinx -b html -W --keep-going -n -E -q docs build/docs/html
	@echo "built build/docs/html/index.html"

# the site's JupyterLab screenshots (docs/_static/screenshots), taken again in headless Chromium: by hand,
# when JupyterLab's look or an example notebook changes (needs Debian's chromium, a Docker engine and the image)
screenshots: $(STAMP)
	$(PY) docs/screenshots.py

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf build $(VENV)
