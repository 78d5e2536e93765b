#!/usr/bin/env bash
# The main job: installs what it needs, starts an embedded broker, produces and reads back events.
set -euo pipefail
cd "$(dirname "$0")/.."
PYBIN=$(bash scripts/bootstrap.sh | tail -n 1)
exec "$PYBIN" -m kaflux.demo "$@"
