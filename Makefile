# kvdash: `make run` starts everything on embedded defaults; `make test` installs and runs the suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
MANAGE := $(BIN)/python manage.py
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint format bench chromium clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $@

run: install
	$(MANAGE) migrate --noinput
	$(MANAGE) load_catalog
	$(MANAGE) setup_demo
	$(MANAGE) run_stack --host $(HOST) --port $(PORT)

# Browser tests drive Debian's Chromium; install it when we may (root with apt), never a downloaded browser.
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: browser tests will be skipped"; }

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: install chromium lint
	$(MANAGE) makemigrations --check --dry-run
	$(MANAGE) check
	@# Tests get their own var/ so they never share the SQLite file or the broker queue with `make run`.
	KVDASH_VAR_DIR=$${KVDASH_VAR_DIR:-$$(mktemp -d)/var} $(BIN)/python -m pytest

bench: install
	@set -e; for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script; done

clean:
	rm -rf var staticfiles .pytest_cache .ruff_cache
