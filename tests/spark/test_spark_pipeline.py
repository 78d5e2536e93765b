"""The main job (issue 18): the query runs before anything is produced, so its progress shows
reading while the producer writes; its temporary output is removed unless ``--output`` is given."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from kaflux.devbrokers import Broker
from pyspark_kaflux.pipeline import parse_args, run

PROGRESS = re.compile(r"produced\s+([\d,]+)\s+read\s+([\d,]+) / ([\d,]+)")


def _run(spark: Any, bootstrap: str, argv: list[str]) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = run(spark, bootstrap, parse_args(argv))
    return code, printed.getvalue()


@pytest.mark.spark
def test_progress_shows_reading_while_writing_and_the_temporary_output_goes(
    spark_session: Any, noida: Broker, topic_name: str
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
    code, printed = _run(spark_session, noida.bootstrap_servers, argv)
    assert code == 0, printed
    assert printed.index("starting the streaming query") < printed.index("streaming 6,000 page views")
    progress = [tuple(int(n.replace(",", "")) for n in m.groups()) for m in PROGRESS.finditer(printed)]
    assert any(read > 0 and produced < total for produced, read, total in progress), printed
    output = re.search(r"into (\S+) \.\.\.", printed)
    assert output is not None and not Path(output[1]).exists()
    assert "removed the temporary output" in printed


@pytest.mark.spark
def test_an_output_directory_given_is_kept(
    spark_session: Any, noida: Broker, topic_name: str, tmp_path: Path
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
    code, printed = _run(spark_session, noida.bootstrap_servers, argv)
    assert code == 0, printed
    assert (out / "aggregates").is_dir() and "removed the temporary output" not in printed
