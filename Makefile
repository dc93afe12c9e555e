# Two commands: `make run` (install, run the 8-GPU scenario) and `make test`.
PYTHON ?= python
PIP ?= $(PYTHON) -m pip

.PHONY: run test test-slow install install-test test-deps

install:
	$(PIP) install -e .

install-test:
	$(PIP) install -e '.[test]'

test-deps:
	sh scripts/install-test-deps.sh

run: install
	collsim run scenarios/8gpu.yaml

test: install-test test-deps
	$(PYTHON) -m pytest -q -m "not slow"

test-slow: install-test test-deps
	$(PYTHON) -m pytest -q -m slow
