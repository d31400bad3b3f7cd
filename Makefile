# Thin wrappers around scripts/: `make run`, `make test ARGS='-k navigate'`, `make lint`, `make bench`, `make corpus`,
# `make clean`.
.PHONY: setup run test lint bench corpus clean

ARGS ?=

setup:
	./scripts/setup

run:
	./scripts/run $(ARGS)

test:
	./scripts/test $(ARGS)

lint: setup
	./scripts/lint

bench: setup
	.venv/bin/python bench/run.py $(ARGS)

corpus: setup
	.venv/bin/python examples/generate_corpus.py examples/corpus

# Generated data only: the example corpus and test/bench leftovers (.venv stays; remove it by hand to rebuild).
clean:
	rm -rf examples/corpus bench/out .pytest_cache .hypothesis .mypy_cache .ruff_cache
