"""asyncio side by side: kaflux.aio against kaflux's sync API, aiokafka and confluent-kafka's
``aio`` wrappers, on the same backlog and the same produce load, with the event loop's lag.

    python bench/bench_aio.py                                  # 1M records, 3 rounds, embedded Tansu
    python bench/bench_aio.py --records 200000 --rounds 1     # a quick look
    python bench/bench_aio.py --part consume --clients aio-async-for,sync-poll

Consuming (the backlog of ``bench_compare.py``: 8-byte keys, 100-byte values, 6 partitions,
written once with confluent-kafka; every run assigns all partitions, reads from the beginning
and touches every value; time and CPU from the first poll to the last record):

* ``aio-async-for``: ``async for record in AsyncConsumer`` (``max.poll.records=500``);
* ``aio-poll``: ``for record in await AsyncConsumer.poll(1.0)`` (the same, without a
  coroutine step per record);
* ``sync-poll``: the sync ``Consumer.poll()`` loop (``bench_compare.py``'s ``kaflux-poll``);
* ``aiokafka-getmany``: ``await getmany(max_records=500)``;
* ``confluent-aio``: confluent-kafka's ``AIOConsumer``, ``await consume(500)`` (each call runs
  the sync consumer's ``consume`` on its thread pool).

Producing (``bench_produce.py``'s records: 8-byte keys, 100-byte values, keyed over 6
partitions, a fresh topic per run; from the first send to the last acknowledgement):

* ``aio-send``: ``await AsyncProducer.send(topic, value, key=key)`` per record (the delivery
  awaitables are not awaited one by one), ``await flush()``;
* ``sync-send``: ``Producer.send`` per record, ``flush()``;
* ``aiokafka-send``: ``await AIOKafkaProducer.send`` per record, ``await flush()``.

The asyncio runs also run a 5 ms ticker task on their loop and report its gaps' p99 and
maximum (the loop's lag while the client works at full speed). Every run is its own child
process; clients take turns within each round; the tables show medians and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from bench_produce import records_pool
from consume_clients import Measurement, Meter, produce, read_kaflux_poll

CONSUMERS = ("aio-async-for", "aio-poll", "sync-poll", "aiokafka-getmany", "confluent-aio")
PRODUCERS = ("aio-send", "sync-send", "aiokafka-send")
PRODUCE_PARTITIONS = 6


class Ticker:
    """A task ticking every 5 ms on the running loop; its gaps are the loop's lag."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    def stop(self) -> dict[str, float]:
        assert self._task is not None
        self._task.cancel()
        gaps = sorted(self.gaps) or [0.0]
        return {"lag_p99_ms": gaps[int(len(gaps) * 0.99)] * 1000, "lag_max_ms": gaps[-1] * 1000}


def run_loop(main: Callable[[], Coroutine[Any, Any, dict[str, Any]]], loop: str) -> dict[str, Any]:
    factory = asyncio.new_event_loop
    if loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


# -- consuming -----------------------------------------------------------------------------------


def read_aio_async_for(bootstrap: str, topic: str, records: int, loop: str) -> dict[str, Any]:
    return _read_aio(bootstrap, topic, records, loop, per_record=True)


def read_aio_poll(bootstrap: str, topic: str, records: int, loop: str) -> dict[str, Any]:
    return _read_aio(bootstrap, topic, records, loop, per_record=False)


def _read_aio(bootstrap: str, topic: str, records: int, loop: str, *, per_record: bool) -> dict[str, Any]:
    from kaflux import TopicPartition
    from kaflux.aio import AsyncConsumer

    async def main() -> dict[str, Any]:
        consumer = AsyncConsumer(
            {
                "bootstrap.servers": bootstrap,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "max.poll.records": 500,
            }
        )
        partitions = await consumer.partitions_for(topic, timeout=30)
        consumer.assign([TopicPartition(topic, p.partition) for p in partitions])
        ticker = Ticker()
        meter = Meter()
        seen = value_bytes = 0
        ticker.start()
        meter.start()
        if per_record:
            async for record in consumer:
                value_bytes += len(record.value)
                seen += 1
                if seen >= records or time.monotonic() > meter.deadline:
                    break
        else:
            while seen < records and time.monotonic() < meter.deadline:
                for record in await consumer.poll(1.0):
                    value_bytes += len(record.value)
                    seen += 1
        result = meter.stop(seen, value_bytes).as_dict()
        result.update(ticker.stop())
        await consumer.close(5)
        return result

    return run_loop(main, loop)


def read_aiokafka_getmany(bootstrap: str, topic: str, records: int, loop: str) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        # Its metadata cache holds only the topics it is asked about (on Apache Kafka, none after
        # start()): a group-less subscription fills it, then assign.
        consumer.subscribe([topic])
        await consumer.start()
        partitions = consumer.partitions_for_topic(topic) or set()
        consumer.unsubscribe()
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        ticker = Ticker()
        meter = Meter()
        seen = value_bytes = 0
        ticker.start()
        meter.start()
        while seen < records and time.monotonic() < meter.deadline:
            for batch in (await consumer.getmany(timeout_ms=1000, max_records=500)).values():
                for message in batch:
                    value_bytes += len(message.value)
                    seen += 1
        result = meter.stop(seen, value_bytes).as_dict()
        result.update(ticker.stop())
        await consumer.stop()
        return result

    return run_loop(main, loop)


def read_confluent_aio(bootstrap: str, topic: str, records: int, loop: str) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from confluent_kafka.aio import AIOConsumer

    async def main() -> dict[str, Any]:
        consumer = AIOConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-aio",
                "enable.auto.commit": False,
                "queued.min.messages": 1_000_000,
            }
        )
        metadata = await consumer.list_topics(topic, timeout=30)
        partitions = metadata.topics[topic].partitions
        await consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        ticker = Ticker()
        meter = Meter()
        seen = value_bytes = 0
        ticker.start()
        meter.start()
        while seen < records and time.monotonic() < meter.deadline:
            for message in await consumer.consume(num_messages=500, timeout=1.0):
                if message.error() is None:
                    value_bytes += len(message.value())
                    seen += 1
        result = meter.stop(seen, value_bytes).as_dict()
        result.update(ticker.stop())
        await consumer.close()
        return result

    return run_loop(main, loop)


def read_sync_poll(bootstrap: str, topic: str, records: int, loop: str) -> dict[str, Any]:
    measurement: Measurement = read_kaflux_poll(bootstrap, topic, records, {"max.poll.records": 500})
    return measurement.as_dict()


CONSUME: dict[str, Callable[[str, str, int, str], dict[str, Any]]] = {
    "aio-async-for": read_aio_async_for,
    "aio-poll": read_aio_poll,
    "sync-poll": read_sync_poll,
    "aiokafka-getmany": read_aiokafka_getmany,
    "confluent-aio": read_confluent_aio,
}


# -- producing -----------------------------------------------------------------------------------


def _topic(bootstrap: str) -> str:
    from kaflux import AdminClient, NewTopic

    topic = f"bench-aio-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, PRODUCE_PARTITIONS)], timeout=30)
    return topic


def _measured(seen: int, value_bytes: int, meter: Meter) -> dict[str, Any]:
    return meter.stop(seen, value_bytes).as_dict()


def send_aio(bootstrap: str, records: int, loop: str) -> dict[str, Any]:
    from kaflux.aio import AsyncProducer

    keys, values = records_pool(records)
    topic = _topic(bootstrap)

    async def main() -> dict[str, Any]:
        producer = AsyncProducer({"bootstrap.servers": bootstrap})
        await producer.partitions_for(topic)
        ticker = Ticker()
        meter = Meter()
        ticker.start()
        meter.start()
        send = producer.send
        for key, value in zip(keys, values, strict=True):
            await send(topic, value, key=key)
        await producer.flush()
        result = _measured(records, sum(map(len, values)), meter)
        result.update(ticker.stop())
        await producer.close()
        return result

    return run_loop(main, loop)


def send_sync(bootstrap: str, records: int, loop: str) -> dict[str, Any]:
    from kaflux import Producer

    keys, values = records_pool(records)
    topic = _topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.partitions_for(topic)
    meter = Meter()
    meter.start()
    send = producer.send
    for key, value in zip(keys, values, strict=True):
        send(topic, value, key=key)
    producer.flush()
    result = _measured(records, sum(map(len, values)), meter)
    producer.close()
    return result


def send_aiokafka(bootstrap: str, records: int, loop: str) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    keys, values = records_pool(records)
    topic = _topic(bootstrap)

    async def main() -> dict[str, Any]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        await producer.partitions_for(topic)
        ticker = Ticker()
        meter = Meter()
        ticker.start()
        meter.start()
        send = producer.send
        for key, value in zip(keys, values, strict=True):
            await send(topic, value, key=key)
        await producer.flush()
        result = _measured(records, sum(map(len, values)), meter)
        result.update(ticker.stop())
        await producer.stop()
        return result

    return run_loop(main, loop)


PRODUCE: dict[str, Callable[[str, int, str], dict[str, Any]]] = {
    "aio-send": send_aio,
    "sync-send": send_sync,
    "aiokafka-send": send_aiokafka,
}


# -- the parent ------------------------------------------------------------------------------------


def run_child(client: str, bootstrap: str, topic: str, records: int, loop: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", client, "--bootstrap-servers", bootstrap, "--topic", topic,
           "--records", str(records), "--loop", loop]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{client} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["records"] < records:
        print(f"warning: {client} handled only {result['records']:,} of {records:,}", file=sys.stderr)
    return result


def table(runs: dict[str, list[dict[str, Any]]], records: int, baseline: str) -> None:
    def median(client: str, key: str) -> float:
        values = [r[key] for r in runs[client] if key in r]
        return statistics.median(values) if values else float("nan")

    base = median(baseline, "records_per_s") if baseline in runs else float("nan")
    print(
        f"\n| client | rounds | rec/s (median) | rec/s (min-max) | x {baseline} | "
        "µs CPU/record | loop lag p99 ms | loop lag max ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for client, results in runs.items():
        rates = [r["records_per_s"] for r in results]
        rate = median(client, "records_per_s")
        p99, worst = median(client, "lag_p99_ms"), max(r.get("lag_max_ms", float("nan")) for r in results)
        lag = "-" if p99 != p99 else f"{p99:.1f} | {worst:.1f}"
        print(
            f"| {client} | {len(results)} | {rate:,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | "
            f"{rate / base:.2f} | {median(client, 'cpu_s') / records * 1e6:.2f} | "
            f"{lag if lag != '-' else '- | -'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="use this cluster (the topic must hold the backlog)")
    parser.add_argument("--topic", default="bench-aio")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--part", choices=["consume", "produce", "both"], default="both")
    parser.add_argument("--clients", default="", help=f"of: {', '.join(CONSUMERS + PRODUCERS)} (default all)")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child in CONSUME:
            result = CONSUME[args.child](args.bootstrap_servers, args.topic, args.records, args.loop)
        else:
            result = PRODUCE[args.child](args.bootstrap_servers, args.records, args.loop)
        print(json.dumps(result))
        return

    chosen = [c.strip() for c in args.clients.split(",") if c.strip()] or list(CONSUMERS + PRODUCERS)
    consumers = [c for c in chosen if c in CONSUMERS and args.part in ("consume", "both")]
    producers = [c for c in chosen if c in PRODUCERS and args.part in ("produce", "both")]
    from kaflux.devbrokers.kinds import start_broker
    from kaflux.records import KERNEL

    broker = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        broker = start_broker("tansu")
        bootstrap = broker.bootstrap_servers
    try:
        print(
            f"{args.records:,} records (8 B keys, 100 B values, {args.partitions} partitions), "
            f"{args.rounds} interleaved rounds, {os.cpu_count()} CPUs, loop {args.loop}, "
            f"kaflux record kernel: {KERNEL}"
        )
        if consumers:
            if broker is not None:
                t0 = time.perf_counter()
                produce(bootstrap, args.topic, args.records, args.partitions)
                print(f"produced the backlog in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            run_child("sync-poll", bootstrap, args.topic, args.records, args.loop)  # untimed warm-up
            runs: dict[str, list[dict[str, Any]]] = {c: [] for c in consumers}
            for round_no in range(args.rounds):
                for client in consumers[round_no % len(consumers) :] + consumers[: round_no % len(consumers)]:
                    result = run_child(client, bootstrap, args.topic, args.records, args.loop)
                    runs[client].append(result)
                    print(
                        f"round {round_no + 1} {client}: {result['records_per_s']:,.0f} rec/s",
                        file=sys.stderr,
                    )
            print("\nConsuming the backlog:")
            table(runs, args.records, "sync-poll")
        if producers:
            runs = {c: [] for c in producers}
            for round_no in range(args.rounds):
                for client in producers[round_no % len(producers) :] + producers[: round_no % len(producers)]:
                    result = run_child(client, bootstrap, "-", args.records, args.loop)
                    runs[client].append(result)
                    print(
                        f"round {round_no + 1} {client}: {result['records_per_s']:,.0f} rec/s",
                        file=sys.stderr,
                    )
            print("\nProducing:")
            table(runs, args.records, "sync-send")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
