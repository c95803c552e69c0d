# Every target installs what it needs into .venv from this repository's own files,
# so a fresh clone on a fresh machine needs nothing else.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m examples.memory_grant

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	PLIMSOLL_BENCH=1 $(BIN)/python -m pytest -q -s tests/benchmarks

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build dist
