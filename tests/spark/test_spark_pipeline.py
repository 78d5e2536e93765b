"""The main job (issue 18): the query runs before anything is produced, so its progress shows
reading while the producer writes; its temporary output is removed unless ``--output`` is given."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kaflux.devbrokers import Broker
from pyspark_kaflux.pipeline import end_offsets, parse_args, run, watch

PROGRESS = re.compile(r"produced\s+([\d,]+)\s+read\s+([\d,]+) / ([\d,]+)")


def _run(spark: Any, bootstrap: str, argv: list[str]) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run(spark, bootstrap, parse_args(argv))
    return code, printed.getvalue()


@pytest.mark.spark
def test_progress_shows_reading_while_writing_and_the_temporary_output_goes(
    spark_session: Any, kafka: Broker, topic_name: str
) -> None:
    # 6 s of production at 1,000 events/s once the query has read the first 100; batches every 2 s
    argv = [
        "--topic",
        topic_name,
        "--partitions",
        "2",
        "--records",
        "6000",
        "--rate",
        "1000",
        "--timeout",
        "180",
    ]
    code, printed = _run(spark_session, kafka.bootstrap_servers, argv)
    assert code == 0, printed
    assert printed.index("starting the streaming query") < printed.index("streaming 6,000 page views")
    progress = [tuple(int(n.replace(",", "")) for n in m.groups()) for m in PROGRESS.finditer(printed)]
    assert any(read > 0 and produced < total for produced, read, total in progress), printed
    output = re.search(r"into (\S+) \.\.\.", printed)
    assert output is not None and not Path(output[1]).exists()
    assert "removed the temporary output" in printed


@pytest.mark.spark
def test_an_output_directory_given_is_kept(
    spark_session: Any, kafka: Broker, topic_name: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = [
        "--topic",
        topic_name,
        "--partitions",
        "1",
        "--records",
        "200",
        "--rate",
        "1000",
        "--output",
        str(out),
    ]
    code, printed = _run(spark_session, kafka.bootstrap_servers, argv)
    assert code == 0, printed
    assert (out / "aggregates").is_dir() and "removed the temporary output" not in printed


class _Done:
    """A producer that has sent ``sent`` events and finished."""

    warmup = 0
    error = None
    failed = 0

    def __init__(self, sent: int) -> None:
        self.sent = sent
        self.warmed_up = SimpleNamespace(is_set=lambda: True, set=lambda: None)

    def is_alive(self) -> bool:
        return False


def _progress(batch: int, rows: int, ends: dict[str, dict[str, int]] | str) -> Any:
    offsets = ends if isinstance(ends, dict) else json.loads(ends)
    return SimpleNamespace(
        batchId=batch,
        numInputRows=rows,
        sources=[SimpleNamespace(endOffset=json.dumps(offsets))],
        processedRowsPerSecond=0.0,
    )


def test_rows_read_are_counted_by_offsets_not_by_spark_s_row_metric() -> None:
    """A micro-batch whose task ran again on another executor reports its rows twice in
    numInputRows (500 rows of batch 1 here), while its offsets, and the output, have them once:
    the job counts by offsets, from where the query started (base 100: the log start)."""
    reports = [
        _progress(0, 1000, {"page-views": {"0": 600, "1": 500}}),
        _progress(1, 2500, {"page-views": {"0": 1600, "1": 1500}}),  # 2,000 read, 2,500 counted
    ]
    query = SimpleNamespace(
        exception=lambda: None,
        recentProgress=reports,
        lastProgress=reports[-1],
        awaitTermination=lambda timeout: None,
    )
    assert watch(query, _Done(3000), 3000, timeout_s=5.0, base=100) == 3000  # type: ignore[arg-type]
    assert end_offsets(reports[1]) == {("page-views", 0): 1600, ("page-views", 1): 1500}
    spark_connect = SimpleNamespace(sources=[SimpleNamespace(endOffset={"t": {"3": 7}})])
    assert end_offsets(spark_connect) == {("t", 3): 7}
