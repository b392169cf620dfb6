# lbparse: every generated file comes from spec/ through `make generate`.
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := nats-server tcpdump tshark flatbuffers-compiler gcc clang chromium jq
# The toolchains that compile and run the generated parsers of other
# languages (tests/codegen/test_langs.py); Java's JDK, Perl and g++ are usually there.
LANG_PACKAGES := golang-go golang-golang-x-text-dev openjdk-17-jdk-headless g++ ruby php-cli \
                 perl lua5.3 mono-mcs mono-runtime nim

.PHONY: install install-system install-langs install-node install-python generate check-generated \
        test test-fast typecheck wheel venv bench demo clean

## install: everything lbparse, its generator and its tests need (pinned)
install: install-system install-langs install-node install-python

install-system:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

## install-langs: the Debian toolchains of the other languages' parsers (Go, Java, C++,
## Ruby, PHP, Perl, Lua, C#, Nim); their Kaitai runtimes come from ../shared/kaitai-runtimes
install-langs:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(LANG_PACKAGES)"

.PHONY: apt-install
apt-install:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

install-node:
	cd tools && npm ci --no-audit --no-fund --loglevel=error

install-python:
	$(PYTHON) -m pip install -q -e '.[all,dev]'

## wheel: dist/lbparse-VERSION.tar.gz and the wheel built from that sdist (the
## capture hot path compiled by mypyc and the pipeline's C kernels, when gcc is there;
## the spec and the Kaitai compiler's npm manifest as package data)
BUILD_PIN := build==1.6.1
wheel:
	rm -f dist/lbparse-*.whl dist/lbparse-*.tar.gz
	$(PYTHON) -m build --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q '$(BUILD_PIN)'
	$(PYTHON) -m build --outdir dist .

## venv: a fresh virtualenv VENV (default .venv) with the wheel installed, not
## editable, with every extra and the dev tools: what CI tests (make test PYTHON=VENV/bin/python);
## the dependencies (tools/pins.py) install while the wheel compiles
VENV ?= .venv
# `build` compiles in an isolated environment of its own: the two pips never share one.
venv:
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q '$(BUILD_PIN)'
	$(VENV)/bin/python tools/pins.py all dev > $(VENV)/pins.txt
	$(VENV)/bin/python -m pip install -q -r $(VENV)/pins.txt & deps=$$!; \
	  $(MAKE) wheel PYTHON=$(abspath $(VENV))/bin/python; built=$$?; \
	  wait $$deps && test $$built = 0
	@# Once (a CI run), pip exited 0 here and installed nothing; the same command
	@# in that clone then worked (cause not found): a missing install is said,
	@# with what pip sees, and installed again.
	wheel="$$(ls $(abspath dist)/lbparse-*.whl)" && \
	  $(VENV)/bin/python -m pip install -q "$$wheel[all,dev]" && \
	  { $(VENV)/bin/python -m pip show -q lbparse >/dev/null 2>&1 || { \
	    echo "make venv: pip installed no lbparse from $$wheel; what it sees:"; \
	    $(VENV)/bin/python -m pip list 2>&1 | grep -i lbparse; \
	    $(VENV)/bin/python -m pip install --force-reinstall --no-deps "$$wheel"; }; }
	cd / && $(abspath $(VENV))/bin/lbparse --version

## docs: the manual (docs/pages, README.md as its home page) as a site in build/site;
## strict: a warning (a page left out of the nav, a broken API reference) fails
.PHONY: docs
docs:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict -q -f docs/mkdocs.yml

## test-light: the light install (`pip install lbparse`, no extra) in a fresh virtualenv
## LIGHT_VENV from the wheel `make wheel` built, and its tests (tests/project/test_extras.py)
LIGHT_VENV ?= .venv-light
.PHONY: test-light
test-light:
	rm -rf $(LIGHT_VENV)
	$(PYTHON) -m venv $(LIGHT_VENV)
	$(LIGHT_VENV)/bin/python -m pip install -q "$$(ls dist/lbparse-*.whl)" "pytest==9.0.3"
	LBPARSE_LIGHT=1 $(LIGHT_VENV)/bin/python -P -m pytest -q -p no:cacheprovider --noconftest \
	    tests/project/test_extras.py

## generate: rebuild generated/ from spec/
generate:
	rm -rf generated/lbparse_generated
	$(PYTHON) tools/generate.py generated

## check-generated: fail if generated/ is not what spec/ gives
check-generated:
	@# A private directory made now (mktemp -d: 0700, created or failed),
	@# not a name reserved in advance that another user could take first.
	@tmp=$$(mktemp -d /tmp/lbparse-gen.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) tools/generate.py "$$tmp" && \
	{ diff -r --exclude=__pycache__ "$$tmp/lbparse_generated" generated/lbparse_generated \
	  || { echo "generated/ is stale: run 'make generate' and commit"; exit 1; }; }
	@echo "generated/ is current"

## test: the whole test suite. -P: lbparse is imported from where it is installed
## (the checkout itself only with an editable install or PYTHONPATH), never
## implicitly from the current directory. On JOBS workers (pytest-xdist; default: every
## core): the tests of one Spark session or one Liftbridge cluster stay on one worker
## (tests/conftest.py), so each starts once a run; and one worker more, the waiting
## lane, for the tests that mostly wait (tests/support/lanes.py). The 30 slowest tests
## are listed at the end (where CI's minutes go).
JOBS ?= auto
# The tests write Python's bytecode caches, even where PYTHONDONTWRITEBYTECODE is
# set (as in some sandboxes): else each of the suite's processes (the workers,
# hundreds of `lbparse` runs) compiles lbparse and pytest's rewritten tests again
# (make test-fast on 2 cores: 60 s without them, 45 with)
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PYTHON) -P -m pytest
test:
	$(PYTEST) -q -n $(JOBS) --dist loadgroup --waiting-lane --durations=30

## test-fast: everything but the tests marked slow (Spark, cluster, live servers,
## tshark, Node and other languages, long fuzz sweeps, command-line runs, any test of half
## a second or more): under half a minute on 2 cores. Property tests draw a third of
## their examples (LBPARSE_TESTS=fast: tests/support/examples.py)
test-fast:
	LBPARSE_TESTS=fast $(PYTEST) -q -m "not slow" -n $(JOBS)

## typecheck: mypy --strict over lbparse and tests/codec/typed_calls.py, the public API as
## users' type checkers see it: right calls pass, wrong ones refused (pyproject.toml [tool.mypy])
.PHONY: typecheck
typecheck:
	$(PYTHON) -m mypy

## lint: ruff's linter and its formatter's check over the checkout (configured in
## pyproject.toml [tool.ruff]); `ruff format .` rewrites what the check refuses
.PHONY: lint
lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

## bench: decoding, capture and report benchmarks (medians of interleaved rounds, ratios,
## one core each); each rewrites its section of docs/pages/benchmarks.md. Under ten minutes
## (the report's makes a capture of 300,000 messages); bench-spark and bench-big apart
bench:
	@for f in bench/bench_*.py; do echo "== $$f"; $(PYTHON) $$f || exit 1; done

## fuzz: the atheris campaign over every target, SECONDS in all (make fuzz SECONDS=600);
## corpus in fuzz/corpus, crashes in fuzz/artifacts (neither committed)
SECONDS ?= 60
.PHONY: fuzz fuzz-ci
fuzz:
	$(PYTHON) fuzz/run.py --seconds $(SECONDS)

## fuzz-ci: a short campaign from the seeds alone, two targets at once (each target
## takes a few seconds to start: about a minute and a half on 2 cores)
fuzz-ci:
	$(PYTHON) fuzz/run.py --seconds 30 --ci --jobs 2

## sanitize: the C modules built with AddressSanitizer and UndefinedBehaviorSanitizer,
## then the hostile-input and differential tests and the fuzz corpus through them
.PHONY: sanitize
sanitize:
	$(PYTHON) tools/sanitize.py -n $(JOBS)

## demo: install, decode the bundled example envelopes, then run the Spark pipeline
## (local mode, every core) on the bundled capture lbparse/examples/sample.pcap, and
## write that capture's report (out/demo/report.html; the path is printed)
demo: install
	$(PYTHON) -m lbparse demo -o out/demo

clean:
	rm -rf build dist *.egg-info .pytest_cache .venv

## generate-LANG: the spec for another language in out/LANG (LANG: javascript,
## java, go, cpp, csharp, rust, ruby, php, perl, lua, nim, python, graphviz,
## html, wireshark, or all)
generate-%:
	$(PYTHON) -m lbparse generate --lang $* --nest -o out

.PHONY: dist bench-spark bench-streams bench-failover

## dist: what a Spark cluster needs: dist/lbparse-env.tar.gz (a packed virtualenv with the
## compiled modules, for --archives), dist/lbparse.zip (for --py-files), the application
## file dist/lbparse_pipeline.py, and dist/requirements.txt (the zip's executors need it)
dist:
	$(PYTHON) tools/dist.py dist

## bench-spark: the pipeline against a plain Spark scan-and-write of the same 5 million
## envelopes, on local[2] (target: >= 0.8 of its speed); minutes, ~2 GB of disk
bench-spark:
	$(PYTHON) bench/bench_spark.py --run

## bench-streams: format("liftbridge-streams") on local[2] against a bare gRPC Subscribe loop,
## a live 3-node cluster holding a million small messages; minutes
bench-streams:
	$(PYTHON) bench/bench_streams.py --run

## bench-failover: a node killed mid-read of a live 3-node cluster, many times (the leader,
## a follower, the planning node; left down or back): the read's end against its bound; minutes
bench-failover:
	$(PYTHON) bench/bench_failover.py --run

## bench-big: the pipeline on ~1 GB of real traffic (a real capture scaled up by ../shared/bench/
## scale_capture.py; made for the run and removed), on local[2], every table checked N times
## (target: >= 100 MB/s); minutes, ~3 GB of disk while it runs
.PHONY: bench-big
bench-big:
	$(PYTHON) bench/bench_big.py --run

## help: these descriptions
.PHONY: help
help:
	@awk '/^## /{sub(/^## /, ""); print}' $(MAKEFILE_LIST)
