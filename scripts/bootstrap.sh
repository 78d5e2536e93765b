#!/usr/bin/env bash
# Installs what kaflux needs into .venv (idempotent; re-runs only when the packaging changes).
#   bash scripts/bootstrap.sh          what the main job needs: kaflux with its spark and broker
#                                      extras (PySpark, the embedded broker), and Java
#   bash scripts/bootstrap.sh --test   everything CI needs too: the dev and docs extras, stunnel4
#                                      (the TLS terminator of the TLS/SASL_SSL tests), and MIT
#                                      Kerberos' KDC, admin tools, kinit and libkrb5-dev (the KDC of
#                                      the GSSAPI tests; python-gssapi builds against libkrb5-dev),
#                                      and faketime (a KDC with a wrong clock); a JDK 17 and Maven,
#                                      and Apache Kafka's jars (4.4.0, and 3.9.2 for version
#                                      negotiation) resolved by Maven into ~/.m2 and
#                                      ~/.cache/kaflux/kafka (a second run reuses them offline),
#                                      and Spark's own Kafka connector (spark-sql-kafka-0-10 4.2.0)
#   --dry-run (after the above)        print the plan, install nothing
# Prints the venv's python path on the last line of stdout; everything else goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
PROFILE=run
EXTRAS=spark,broker
# Apache Kafka versions the tests run: the reference broker, and the newest 3.x for negotiation.
KAFKA_VERSIONS="4.4.0 3.9.2"
DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --test) PROFILE=test; EXTRAS=dev,spark,broker,docs,schema-registry ;;
    --dry-run) DRY_RUN=1 ;;
    *) echo "bootstrap: unknown argument $arg (use --test, --dry-run)" >&2; exit 2 ;;
  esac
done
if [ "$DRY_RUN" = 1 ]; then
  echo "profile: $PROFILE"
  echo "pip: -e .[$EXTRAS]"
  echo "apt: openjdk-17-jre-headless (if no java)$([ "$PROFILE" = test ] && echo ', openjdk-17-jdk-headless and maven (if no javac/mvn), stunnel4 (if missing), krb5-kdc krb5-admin-server krb5-user libkrb5-dev faketime (if missing)')"
  [ "$PROFILE" = test ] && echo "kafka jars: $KAFKA_VERSIONS (Maven Central, into ~/.m2 and ~/.cache/kaflux/kafka)"
  exit 0
fi
# Reinstall when the packaging or the compiled kernel's sources change.
# (every .pyx/.pxi/.h of the kernels, and definitions.py, whose source lists setup.py reads)
want=$(cat pyproject.toml setup.py src/kaflux/records/definitions.py src/kaflux/records/*.pyx \
  src/kaflux/records/*.pxi src/kaflux/records/*.h | sha256sum | cut -d' ' -f1)

say() { echo "bootstrap: $*" >&2; }

apt_install() {  # apt_install "PACKAGE..." WHY
  if command -v apt-get >/dev/null 2>&1; then
    say "installing $1 ($2) with apt-get"
    # shellcheck disable=SC2086  # several packages, one word each
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $1) >&2
  else
    return 1
  fi
}

if ! command -v java >/dev/null 2>&1; then
  apt_install openjdk-17-jre-headless "Java 17, for PySpark" \
    || { say "no Java found and no apt-get; install a Java 17 runtime"; exit 1; }
fi

if [ "$PROFILE" = test ] && ! { command -v javac && command -v mvn; } >/dev/null 2>&1; then
  apt_install "openjdk-17-jdk-headless maven" "a JDK and Maven: Apache Kafka's jars and the Java client harness" \
    || { say "no javac/mvn and no apt-get; install a JDK 17 and Maven 3"; exit 1; }
fi

if [ "$PROFILE" = test ] && ! command -v stunnel4 >/dev/null 2>&1; then
  apt_install stunnel4 "the TLS terminator of the TLS tests" \
    || say "no stunnel4 and no apt-get; the TLS tests will be skipped"
fi

# The KDC's programs live in /usr/sbin, which is not on every PATH: look there too.
if [ "$PROFILE" = test ] && ! { PATH="$PATH:/usr/sbin:/sbin" command -v krb5kdc && PATH="$PATH:/usr/sbin:/sbin" \
    command -v kadmin.local && command -v kinit && command -v krb5-config && command -v faketime; } >/dev/null 2>&1; then
  apt_install "krb5-kdc krb5-admin-server krb5-user libkrb5-dev faketime" \
    "MIT Kerberos: the KDC of the GSSAPI tests, and the library python-gssapi builds against" \
    || { say "no Kerberos KDC/libkrb5-dev and no apt-get; install MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user, libkrb5-dev) and faketime"; exit 1; }
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV"
fi
# The test profile installs a superset: its stamp satisfies the run profile too.
stamp_ok() { [ "$(cat "$VENV/.kaflux-installed-$1" 2>/dev/null || true)" = "$want" ]; }
if ! stamp_ok "$PROFILE" && ! { [ "$PROFILE" = run ] && stamp_ok test; }; then
  say "installing kaflux with its [$EXTRAS] extras into $VENV (the first run downloads and builds for a minute or two)"
  "$VENV/bin/python" -m pip install --progress-bar on --upgrade pip setuptools wheel >&2
  "$VENV/bin/python" -m pip install --progress-bar on -e ".[$EXTRAS]" >&2
  # Byte-code for the editable sources (even where PYTHONDONTWRITEBYTECODE is set): without it
  # every start compiles the 20,000 generated lines of the wire protocol again (~0.3 s of CPU).
  say "compiling kaflux's sources to byte-code"
  "$VENV/bin/python" -m compileall -q src >/dev/null
  echo "$want" > "$VENV/.kaflux-installed-$PROFILE"
  say "installed"
fi
if [ "$PROFILE" = test ]; then
  # Apache Kafka's jars: resolved once with Maven (strict checksums), then found in the cache.
  "$VENV/bin/python" -m kaflux.devbrokers resolve $KAFKA_VERSIONS >&2 \
    || { say "could not get Apache Kafka's jars (above); the tests need them"; exit 1; }
  # Spark's own Kafka connector (format("kafka")), the anchor of the Spark differential tests.
  "$VENV/bin/python" tests/support/spark_kafka_connector.py resolve >&2 \
    || { say "could not get Spark's Kafka connector (above); the tests need it"; exit 1; }
fi
echo "$VENV/bin/python"
