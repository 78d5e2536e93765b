#!/usr/bin/env bash
# Installs everything kaflux needs into .venv (idempotent; re-runs only when pyproject.toml changes).
# Usage: source-free; prints the venv's python path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.kaflux-installed
# Reinstall when the packaging or the compiled kernel's sources change.
want=$(cat pyproject.toml setup.py src/kaflux/records/_kernel.pyx src/kaflux/records/_kernel_impl.h \
  src/kaflux/records/_encode.pyx | sha256sum | cut -d' ' -f1)

if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: installing Java 17 for PySpark" >&2
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) >&2
  else
    echo "bootstrap: no Java found and no apt-get; install a Java 17 runtime" >&2; exit 1
  fi
fi

# stunnel4: the TLS terminator the TLS/SASL_SSL tests put in front of a broker (kaflux.testing.tls).
if ! command -v stunnel4 >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing stunnel4 for the TLS tests" >&2
    (apt-get update -qq && apt-get install -y -qq stunnel4) >&2
  else
    echo "bootstrap: no stunnel4 and no apt-get; the TLS tests will be skipped" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  echo "bootstrap: installing kaflux with its dev and spark extras (first run takes a few minutes)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel >&2
  "$VENV/bin/python" -m pip install -q -e '.[dev,spark,schema-registry]' >&2
  echo "$want" > "$STAMP"
fi
echo "$VENV/bin/python"
