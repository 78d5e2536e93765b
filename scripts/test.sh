#!/usr/bin/env bash
# Runs every check CI runs: lint, format, types, generated-code drift, the documentation site
# (mkdocs build --strict), and the whole test suite. Installs the test profile (bootstrap.sh --test).
set -euo pipefail
cd "$(dirname "$0")/.."
PYBIN=$(bash scripts/bootstrap.sh --test | tail -n 1)
BIN=$(dirname "$PYBIN")
echo "== ruff check";   "$BIN/ruff" check src tests tools bench
echo "== ruff format";  "$BIN/ruff" format --check src tests tools bench
echo "== mypy (strict on src and tools; tests: every function body checked)"; "$BIN/mypy"
echo "== generated protocol is up to date"; "$PYBIN" tools/generate_messages.py --check
echo "== generated reference pages are up to date"; "$PYBIN" tools/generate_docs.py --check
echo "== documentation site (mkdocs build --strict)"
NO_MKDOCS_2_WARNING=1 "$BIN/mkdocs" build --strict --quiet --site-dir "$(mktemp -d)/site"
# The compiled record kernel must have been built here: without this, a failed build would
# only skip its tests. The pure twin runs the same record tests in the same session.
export KAFLUX_REQUIRE_COMPILED=${KAFLUX_REQUIRE_COMPILED:-1}
if [ $# -eq 0 ]; then
  # The whole suite on two workers (pytest-xdist): most tests wait on brokers, not on the CPU.
  # Every Spark test runs on one worker (tests/conftest.py groups them), sharing one SparkSession.
  echo "== pytest (2 workers)"; "$PYBIN" -m pytest -n 2 --dist loadgroup
else
  echo "== pytest";       "$PYBIN" -m pytest "$@"
fi
if [ $# -eq 0 ]; then
  # The pure-Python record kernel end to end: the consumer's collection and poll_arrow() on it.
  echo "== pytest, pure-Python record kernel"
  KAFLUX_PURE=1 "$PYBIN" -m pytest -q tests/unit/consumer/test_fetch_collector.py \
    tests/unit/consumer/test_poll_arrow.py tests/integration/test_consumer_fetch.py \
    tests/integration/test_poll_arrow_on_brokers.py
  # The wheel users install: built with the compiled kernels, installed into a fresh venv, and
  # the record tests run against it (about 2 minutes).
  echo "== wheel: build, install into a fresh venv, record tests"
  PYTHON="$PYBIN" bash scripts/test_wheel.sh
fi
