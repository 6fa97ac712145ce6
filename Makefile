# Two commands do all the set-up on a fresh machine (Python 3.11):
#   make run    installs into .venv (first time only) and starts the app
#   make test   installs into .venv (first time only) and runs the tests
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
ARGS  ?=

.PHONY: run test test-fast lint wheel-check bench

$(STAMP): pyproject.toml
	python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,cluster,tensorflow]'  # the tests use every extra
	touch $(STAMP)

run: $(STAMP)
	$(PY) main.py $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q --durations=25  # the slowest tests listed: the suite must stay well under 15 minutes

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports && $(VENV)/bin/mypy engine && $(VENV)/bin/mypy app

wheel-check: $(STAMP)
	$(PY) .ci/wheel_check.py

bench: $(STAMP)
	$(PY) main.py bench core
