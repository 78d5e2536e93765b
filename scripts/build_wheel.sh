#!/usr/bin/env bash
# Builds kaflux's wheel with the compiled record kernels (_kernel, _encode) for this platform,
# tagged manylinux as cibuildwheel would tag it (auditwheel decides the tag), into dist/.
# Usage: bash scripts/build_wheel.sh [OUTDIR]   (prints the wheel's path on the last line)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-dist}
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
"$PY" -m build --wheel --outdir "$RAW" . >&2
wheel=$(ls "$RAW"/kaflux-*.whl)
"$PY" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
missing = [m for m in ("kaflux/records/_kernel.", "kaflux/records/_encode.")
           if not any(n.startswith(m) and n.endswith((".so", ".pyd")) for n in names)]
if missing:
    sys.exit(f"build_wheel: {sys.argv[1]} has no compiled {', '.join(missing)}: was a C compiler available?")
PY
mkdir -p "$OUT"
if "$PY" -c "import auditwheel" 2>/dev/null; then
  # The platform tag the wheel's symbols allow (e.g. manylinux_2_17_x86_64); nothing to graft:
  # the kernels link against libc only, so retagging is all auditwheel repair would do.
  tag=$("$PY" -m auditwheel show "$wheel" 2>/dev/null | tr -d '\n' | sed -n 's/.*platform tag: *"\([^"]*\)".*/\1/p')
  if [ -n "$tag" ]; then
    "$PY" -m wheel tags --remove --platform-tag "$tag" "$wheel" >/dev/null
    wheel=$(ls "$RAW"/kaflux-*"$tag"*.whl)
  fi
fi
cp "$wheel" "$OUT/"
echo "$OUT/$(basename "$wheel")"
