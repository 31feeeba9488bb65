# UNO: the two commands are `make run` and `make test`; each sets itself up on a fresh machine.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
CARGO ?= cargo
MVN   ?= mvn -q -B
PYTEST_ARGS ?=
FUZZ_TIME ?= 120

.PHONY: all setup build run test lint fmt clean test-js test-python test-java test-rust test-fuzz fuzz lint-python lint-java lint-rust

all: build

setup:
	@scripts/setup.sh all

build: setup

run: setup
	./uno run

test: setup lint test-js test-python test-java test-rust test-fuzz

lint: lint-python lint-java lint-rust

lint-python:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PYTHONPATH=. $(VENV)/bin/lint-imports --no-cache --no-logo

lint-java:
	@if [ -f pom.xml ]; then $(MVN) -DskipTests -Dfmt.skip=false fmt:check; fi

lint-rust:
	@if compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null; then \
	  cd nfs && $(CARGO) fmt --all -- --check && $(CARGO) clippy -q --workspace --all-targets -- -D warnings \
	  && (cd fuzz && $(CARGO) fmt -- --check); fi

fmt:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	@if [ -f pom.xml ]; then $(MVN) fmt:format; fi
	@if compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null; then cd nfs && $(CARGO) fmt --all && (cd fuzz && $(CARGO) fmt); fi

# The web view's data-to-drawing code (nf_agent/ui_static/*.js), with Node's own test runner (no npm package).
test-js:
	node --test tests/ui/

test-python:
	$(VENV)/bin/pytest -q -ra $(PYTEST_ARGS)

test-java:
	@if [ -f pom.xml ]; then mvn -B test 2>&1 | grep -E "Tests run:|FAIL|ERROR|BUILD" ; test $${PIPESTATUS[0]} -eq 0; fi

test-rust:
	@if compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null; then cd nfs && $(CARGO) test -q --workspace; fi

# Short bounded fuzz pass (cargo-fuzz, 2 s per target): with the nightly toolchain (the machine image has it)
# cargo-fuzz is installed on demand (~1.5 min once); without nightly, a note (the corpora still run in cargo test).
test-fuzz:
	@if [ -d nfs/fuzz ]; then \
	  if cargo +nightly --version >/dev/null 2>&1; then scripts/setup.sh fuzz; fi; \
	  scripts/fuzz.sh --short; fi

# Long bounded fuzz pass: FUZZ_TIME seconds per target (installs cargo-fuzz on demand).
fuzz:
	scripts/setup.sh fuzz
	scripts/fuzz.sh --time $(FUZZ_TIME)

clean:
	-./uno down --all 2>/dev/null
	rm -rf .venv .stamps oneswitch/target nfs/target nfs/fuzz/target nfs/fuzz/work nfs/fuzz/artifacts .pytest_cache .ruff_cache build bench/out
