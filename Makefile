# UNO: the two commands are `make run` and `make test`; each sets itself up on a fresh machine.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
CARGO ?= cargo
MVN   ?= mvn -q -B
PYTEST_ARGS ?=

.PHONY: all setup build run test lint fmt clean test-python test-java test-rust lint-python lint-java lint-rust

all: build

setup:
	@scripts/setup.sh all

build: setup

run: setup
	./uno run

test: setup lint test-python test-java test-rust

lint: lint-python lint-java lint-rust

lint-python:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

lint-java:
	@if [ -f pom.xml ]; then $(MVN) -DskipTests -Dfmt.skip=false fmt:check; fi

lint-rust:
	@if compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null; then \
	  cd nfs && $(CARGO) fmt --all -- --check && $(CARGO) clippy -q --workspace --all-targets -- -D warnings; fi

fmt:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	@if [ -f pom.xml ]; then $(MVN) fmt:format; fi
	@if compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null; then cd nfs && $(CARGO) fmt --all; fi

test-python:
	$(VENV)/bin/pytest -q -ra $(PYTEST_ARGS)

test-java:
	@if [ -f pom.xml ]; then mvn -B test 2>&1 | grep -E "Tests run:|FAIL|ERROR|BUILD" ; test $${PIPESTATUS[0]} -eq 0; fi

test-rust:
	@if compgen -G 'nfs/crates/*/Cargo.toml' >/dev/null; then cd nfs && $(CARGO) test -q --workspace; fi

clean:
	-./uno down --all 2>/dev/null
	rm -rf .venv .stamps oneswitch/target nfs/target .pytest_cache .ruff_cache build bench/out
