"""``crashlab list`` as it is printed, on a SQLite file and on a real PostgreSQL server: the
``--json`` stream (made by the database, not by the pydantic models) against the published
schema and, row by row, against the models' own dump; the terminal view's columns; and what a
``crashlab list`` process imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from crashlab.escape import escape
from crashlab.index import Filters, Index
from crashlab.index.commands import listing
from tests.conftest import ROOT, run_cli
from tests.index_fixtures import crash, signature
from tests.schema_check import errors

#: Outside text as a report or a log may hold it: quotes, backslashes, control characters (C0,
#: C1), markup, non-ASCII, a character outside the BMP, every bidirectional control.
HOSTILE = ('n"o\\d\te\x1b[31m\x07\x9b [red]x[/red] ünï 😀 '
           '\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u202e')


def _record_varied(address: str) -> None:
    """Crashes whose fields take every shape a row can have: nulls and values, a versions
    dictionary, hostile text, times a hair below the next second (where rounding to the
    microsecond and cutting to the second disagree), and ties broken by id."""
    with Index(address) as index:
        index.record(crash("plain", signature("0123456789ab"), 1_700_000_000.0, host=None))
        index.record(crash("full", signature("fedcba987654", HOSTILE), 1_700_000_100.9999996,
                           host=HOSTILE, gpus="NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3",
                           driver="580.95", sglang="0.5.23", torch="2.9.1",
                           versions={"sglang": "0.5.23", "torch": "2.9.1", HOSTILE: "1"},
                           run_dir="/runs/full", incarnation=3, pid=4242, rank="TP1",
                           role="decode", label="COLLATERAL", deployment="pd-east"))
        for number in range(3):  # one second, three crashes: the newest id first
            index.record(crash(f"tie-{number}", signature("0123456789ab"), 1_700_000_050.5,
                               host="node2", label="FAULT"))
        index.record(crash("fraction", signature("fedcba987654", HOSTILE), 1_700_000_050.75,
                           host="node2"))


def _streamed(address: str, *options: str) -> tuple[dict, list[str]]:
    done = run_cli("list", "--json", "--db", address, *options)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout), done.stdout.decode().splitlines()


@pytest.mark.parametrize("options, filters", [
    ((), Filters()),
    (("--host", "node2", "--limit", "3"), Filters(host="node2", limit=3)),
    (("--signature", "fedc"), Filters(signature="fedc")),
    (("--since", "2023-11-14T22:14:10"), Filters(since=1_700_000_050.0)),
])
def test_list_json_is_the_models_dump_row_by_row_and_valid(index_address, options, filters):
    _record_varied(index_address)
    document, lines = _streamed(index_address, *options)
    assert errors(document, "crash-list") == []
    with Index(index_address) as index:
        expected = listing(index, filters).model_dump(mode="json")
    assert {key: value for key, value in document.items() if key != "crashes"} == \
        {key: value for key, value in expected.items() if key != "crashes"}
    assert len(document["crashes"]) == len(expected["crashes"]) > 0
    for streamed, dumped in zip(document["crashes"], expected["crashes"], strict=True):
        assert list(streamed) == list(dumped)  # the same fields, in the same order
        assert streamed == dumped
    assert len(lines) == len(expected["crashes"]) + 2  # one crash per line, between head and tail


def test_list_json_times_are_cut_to_the_second_and_ties_go_newest_id_first(index_address):
    _record_varied(index_address)
    crashes = _streamed(index_address)[0]["crashes"]
    assert [(c["source"], c["crashed_at"]) for c in crashes] == [
        ("/runs/full", "2023-11-14T22:15:00+00:00"),
        ("/runs/fraction", "2023-11-14T22:14:10+00:00"),
        ("/runs/tie-2", "2023-11-14T22:14:10+00:00"),
        ("/runs/tie-1", "2023-11-14T22:14:10+00:00"),
        ("/runs/tie-0", "2023-11-14T22:14:10+00:00"),
        ("/runs/plain", "2023-11-14T22:13:20+00:00")]
    assert crashes[0]["versions"][HOSTILE] == "1" and crashes[0]["host"] == HOSTILE


def test_list_json_of_an_empty_selection_is_an_empty_list(index_address):
    _record_varied(index_address)
    document, _ = _streamed(index_address, "--host", "nowhere")
    assert document["crashes"] == [] and errors(document, "crash-list") == []


def test_the_terminal_view_aligns_escaped_cells_and_shows_what_the_json_holds(index_address):
    _record_varied(index_address)
    done = run_cli("list", "--db", index_address)
    assert done.returncode == 0, done.stderr.decode()
    index, heading, *rows = done.stdout.decode().splitlines()
    assert index == f"index: {_streamed(index_address)[0]['index']}"
    starts = [heading.index(name) for name in ("TIME", "HOST", "SIGNATURE", "LABEL", "TITLE")]
    crashes = _streamed(index_address)[0]["crashes"]
    escaped = escape(HOSTILE)
    assert "\\x1b" in escaped and "\x1b" not in escaped
    assert not [char for char in done.stdout.decode() if not (char.isprintable() or char == "\n")]
    assert len(rows) == len(crashes)
    for row, listed in zip(rows, crashes, strict=True):
        assert not row.endswith(" ")
        cells = [row[:starts[0]]] + [row[a:b] for a, b in zip(starts, starts[1:], strict=False)] \
            + [row[starts[-1]:]]
        host = escaped if listed["host"] == HOSTILE else listed["host"] or "unknown"
        title = escaped if listed["title"] == HOSTILE else listed["title"]
        assert [cell.rstrip() for cell in cells] == [
            str(listed["id"]), listed["crashed_at"].replace("T", " ")[:19], host,
            listed["signature"], listed["label"] or "-", title]


def _imported(*args: str) -> set[str]:
    """The modules a real ``crashlab`` process imports (python -X importtime), by top name."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "crashlab", *args],
                          capture_output=True, cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr.decode()
    found = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", done.stderr.decode(), re.M)
    return {name.split(".")[0] for name in found}


def test_crashlab_list_on_sqlite_imports_neither_psycopg_nor_pydantic(tmp_path):
    address = str(tmp_path / "index.sqlite")
    _record_varied(address)
    terminal, as_json = _imported("list", "--db", address), _imported("list", "--json", "--db", address)
    assert "click" in terminal and "rich" in terminal  # the check sees what is imported
    assert not {"psycopg", "psycopg_binary", "pydantic", "pydantic_core"} & (terminal | as_json)
    assert "rich" not in as_json
