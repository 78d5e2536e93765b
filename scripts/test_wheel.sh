#!/usr/bin/env bash
# Builds the wheel (scripts/build_wheel.sh), installs it into a fresh venv with the record
# tests' own needs only, and runs the record tests against the installed package: its compiled
# kernels, not the source tree's. About 1-2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
wheel=$(bash scripts/build_wheel.sh "$WORK/dist" | tail -n 1)
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q "$wheel[arrow]" pytest pytest-timeout hypothesis kafka-python >&2
# the command the wheel installs (docs/installing.md's wheel path; tests/docs/test_install.py
# covers the broker extra with a pure build)
"$WORK/venv/bin/kaflux" --help >/dev/null
cd tests  # not the repository root: nothing of src/ may be importable
"$WORK/venv/bin/python" - <<'PY'
import sys
import kaflux.records as records
from kaflux.records import kernels
assert "site-packages" in records.__file__, f"kaflux comes from {records.__file__}, not the wheel"
assert records.KERNEL == "compiled" and kernels.encoder().KIND == "compiled", "the wheel's kernels did not load"
print(f"wheel: {records.__file__} with the {records.KERNEL} record kernel", file=sys.stderr)
PY
KAFLUX_REQUIRE_COMPILED=1 "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider -c ../pyproject.toml \
  --rootdir .. unit/records "$@"
