#!/usr/bin/env bash
# The main job: installs what it needs, starts an embedded broker, streams page views through
# Spark (format "kaflux") into Parquet and prints a summary. Options: see --help.
set -euo pipefail
cd "$(dirname "$0")/.."
PYBIN=$(bash scripts/bootstrap.sh | tail -n 1)
exec "$PYBIN" -m pyspark_kaflux.pipeline "$@"
