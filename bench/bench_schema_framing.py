"""Schema-id framing: prefix (schema id before the payload) against header (schema GUID in a
record header), kaflux's Avro serializer and deserializer side by side with confluent-kafka's.

    python bench/bench_schema_framing.py --records 50000 --rounds 3

No broker: the tests' Schema Registry double, then, interleaved round after round, each
(de)serializer on the same ``--records`` page views (the main job's ``PageView``), once per
framing. The deserializers read with a warm schema cache (steady state), records written by the
same client with the same framing; each record has its own headers list, as from a consumer.
CPU is the process's CPU time, per record.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from kaflux.schema_registry import SchemaRegistryClient  # noqa: E402
from kaflux.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from kaflux.serialization import SerializationContext  # noqa: E402
from pyspark_kaflux.pipeline import PAGE_VIEW_AVRO, page_view_event  # noqa: E402

from support.schema_registry import SchemaRegistryDouble  # noqa: E402

TOPIC = "views"


def timed(fn: Callable[[], int]) -> tuple[int, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    n = fn()
    return n, time.perf_counter() - wall, time.process_time() - cpu


def jobs(registry: str, count: int) -> dict[str, Callable[[], int]]:
    import confluent_kafka.schema_registry as ck
    from confluent_kafka.schema_registry.avro import AvroDeserializer as CkAvroDeserializer
    from confluent_kafka.schema_registry.avro import AvroSerializer as CkAvroSerializer
    from confluent_kafka.serialization import MessageField
    from confluent_kafka.serialization import SerializationContext as CkContext

    rng = random.Random(7)
    values = [page_view_event(rng, 1_790_000_000_000 + i) for i in range(count)]
    client, peer = SchemaRegistryClient({"url": registry}), ck.SchemaRegistryClient({"url": registry})
    out: dict[str, Callable[[], int]] = {}
    for framing, ck_framing in (
        ("prefix", ck.prefix_schema_id_serializer),
        ("header", ck.header_schema_id_serializer),
    ):
        ours = AvroSerializer(client, PAGE_VIEW_AVRO, {"schema.id.serializer": framing})
        theirs = CkAvroSerializer(peer, PAGE_VIEW_AVRO, conf={"schema.id.serializer": ck_framing})
        ctxs = [SerializationContext(TOPIC, "value", []) for _ in values]
        ck_ctxs = [CkContext(TOPIC, MessageField.VALUE, []) for _ in values]
        written = [ours(v, c) for v, c in zip(values, ctxs, strict=True)]
        ck_written = [theirs(v, c) for v, c in zip(values, ck_ctxs, strict=True)]
        reader, ck_reader = AvroDeserializer(client), CkAvroDeserializer(peer)
        reader(written[0], ctxs[0]), ck_reader(ck_written[0], ck_ctxs[0])  # warm the caches

        def serialize(ser: Any, make: Callable[[], Any]) -> Callable[[], int]:
            def run() -> int:
                for value in values:
                    ser(value, make())
                return count

            return run

        def deserialize(de: Any, data: list[Any], contexts: list[Any]) -> Callable[[], int]:
            def run() -> int:
                for d, c in zip(data, contexts, strict=True):
                    de(d, c)
                return count

            return run

        out[f"kaflux AvroSerializer, {framing}"] = serialize(
            ours, lambda: SerializationContext(TOPIC, "value", [])
        )
        out[f"confluent-kafka AvroSerializer, {framing}"] = serialize(
            theirs, lambda: CkContext(TOPIC, MessageField.VALUE, [])
        )
        out[f"kaflux AvroDeserializer, {framing}"] = deserialize(reader, written, ctxs)
        out[f"confluent-kafka AvroDeserializer, {framing}"] = deserialize(ck_reader, ck_written, ck_ctxs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with SchemaRegistryDouble() as registry:
        work = jobs(registry.url, args.records)
        results: dict[str, list[tuple[int, float, float]]] = {name: [] for name in work}
        for _ in range(args.rounds):
            for name, job in work.items():
                results[name].append(timed(job))
    print("| job | rec/s (median) | min-max | µs CPU/record |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        rates = [n / wall for n, wall, _ in runs]
        cpu = statistics.median(c / n * 1e6 for n, _, c in runs)
        print(
            f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | {cpu:.2f} |"
        )


if __name__ == "__main__":
    main()
