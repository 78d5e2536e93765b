"""Start-up cost: ``import kaflux`` against the other clients, ``kaflux --version``, and the
``kaflux`` command consuming 10k records to /dev/null against kcat, side by side in one run.

    python bench/bench_startup.py                  # 15 runs of each, an embedded noida-db broker
    python bench/bench_startup.py --runs 30 --records 10000
    python bench/bench_startup.py --no-consume     # imports and commands only, no broker

Each measurement is a fresh process (what a shell user pays), run in turns so that machine load
hits every client alike; the table shows the median and the best wall time, and the CPU time
(user + system) of the median run. ``python -c pass`` is the floor every Python command pays.
kcat is used if it is on PATH (``apt-get install kcat``). ``-X importtime`` breaks an import down:
``python -X importtime -c 'import kaflux' 2>&1 | sort -t'|' -k2 -n | tail``.

Byte-code caching is on (``PYTHONDONTWRITEBYTECODE`` dropped, ``src`` compiled first), as for
any installed package; ``--no-bytecode-cache`` measures a checkout where Python may not write
``__pycache__`` (then each run compiles the generated protocol again, about 0.3 s of CPU).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command`` (its output discarded; it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=True, timeout=120
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(
    cases: dict[str, list[str]], runs: int, env: dict[str, str]
) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for command in cases.values():
        timed(command, env)  # warm the page cache and the .pyc files
    for _ in range(runs):
        for name, command in cases.items():
            results[name].append(timed(command, env))
    return results


def report(title: str, results: dict[str, list[tuple[float, float]]]) -> None:
    print(f"\n{title}")
    print(f"{'':<44}{'median ms':>10}{'best ms':>10}{'CPU ms':>10}")
    for name, samples in results.items():
        walls = sorted(w for w, _ in samples)
        median = statistics.median(walls)
        cpu = statistics.median(c for _, c in samples)
        print(f"{name:<44}{median * 1000:>10.0f}{walls[0] * 1000:>10.0f}{cpu * 1000:>10.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description="start-up cost of kaflux, its CLI and other clients")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--no-consume", action="store_true", help="skip the consuming runs (no broker)")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="compile kaflux's sources on every run (PYTHONDONTWRITEBYTECODE=1), as an editable "
        "install with bytecode writing disabled does",
    )
    args = parser.parse_args()
    # Byte-code caching on, as for any user: with PYTHONDONTWRITEBYTECODE set (this machine sets
    # it) every run compiles kaflux's 20,000 lines of generated protocol again, while the other
    # clients' installed .pyc files are used.
    drop = ("KAFLUX_BOOTSTRAP_SERVERS", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if not args.no_bytecode_cache:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parent.parent / "src")],
            check=True,
            env=env,
        )
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    py = sys.executable
    imports = {
        "python -c pass": [py, "-c", "pass"],
        "import kaflux": [py, "-c", "import kaflux"],
        "import confluent_kafka": [py, "-c", "import confluent_kafka"],
        "import aiokafka": [py, "-c", "import aiokafka"],
        "from kaflux import Consumer, Producer": [py, "-c", "from kaflux import Consumer, Producer"],
        "from confluent_kafka import Consumer, Producer": [
            py,
            "-c",
            "from confluent_kafka import Consumer, Producer",
        ],
    }
    report(f"imports ({args.runs} runs each)", measure(imports, args.runs, env))
    kaflux = str(BIN / "kaflux")
    report(
        f"commands ({args.runs} runs each)",
        measure(
            {
                "kaflux --version": [kaflux, "--version"],
                "kaflux --help": [kaflux, "--help"],
                "kaflux consume --help": [kaflux, "consume", "--help"],
            },
            args.runs,
            env,
        ),
    )
    if args.no_consume:
        return 0

    from kaflux.devbrokers.brokers import NoidaBroker

    with NoidaBroker() as broker:
        bootstrap = broker.bootstrap_servers
        topic = "startup-bench"
        subprocess.run([kaflux, "topics", "create", topic, "-b", bootstrap], check=True, env=env)
        lines = b"".join(b"%08d %s\n" % (i, b"x" * 90) for i in range(args.records))
        subprocess.run([kaflux, "produce", topic, "-b", bootstrap], input=lines, check=True, env=env)
        n = str(args.records)
        consume = {
            f"kaflux consume -n {n} > /dev/null": [
                kaflux,
                "consume",
                topic,
                "--from-beginning",
                "-n",
                n,
                "-b",
                bootstrap,
            ],
            f"kaflux consume -n {n} --format raw": [
                kaflux,
                "consume",
                topic,
                "--from-beginning",
                "-n",
                n,
                "--format",
                "raw",
                "-b",
                bootstrap,
            ],
        }
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        if kcat is not None:
            consume[f"kcat -C -c {n} -e > /dev/null"] = [
                kcat,
                "-C",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-o",
                "beginning",
                "-c",
                n,
                "-e",
                "-q",
            ]
        else:
            print("\nkcat not found: apt-get install kcat to compare with it")
        report(
            f"consuming {args.records:,} records of 100 bytes to /dev/null ({args.runs} runs each)",
            measure(consume, args.runs, env),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
