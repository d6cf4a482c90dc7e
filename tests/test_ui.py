"""crashlab ui: the web view of the crash index, through a real ``crashlab ui`` process on
127.0.0.1, read with requests, on a fleet recorded into a real index on SQLite and on PostgreSQL
(tests/ui_fleet.py). The browser's view is tests/test_ui_browser.py; hostile text is in
tests/test_views_hostile.py."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
import requests

from crashlab.index import Index
from tests.conftest import ROOT, run_cli
from tests.index_fixtures import DAMAGED_RUN_REPORTS, crash, signature
from tests.ui_fleet import UiServer, seed

A_SIGNATURE = signature("a5a5a5a5a5a5")


@pytest.fixture
def fleet(index_address, tmp_path):
    return seed(index_address, tmp_path)


@pytest.fixture
def ui(fleet):
    server = UiServer(fleet.address)
    yield server
    server.stop()


def _get(ui, path: str, status: int = 200) -> str:
    response = requests.get(ui.url + path, timeout=120)
    assert response.status_code == status, (path, response.status_code)
    return response.text


class _Table(HTMLParser):
    """The rows of the table with id TABLE_ID, as lists of cell texts; the links in them."""

    def __init__(self, table_id: str):
        super().__init__(convert_charrefs=True)
        self.table_id, self.inside, self.rows, self.links = table_id, False, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.rows[-1].append("")
        elif self.inside and tag == "a":
            self.links.append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False

    def handle_data(self, data):
        if self.inside and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def table(page: str, table_id: str) -> _Table:
    parsed = _Table(table_id)
    parsed.feed(page)
    assert parsed.rows, f"no table {table_id}"
    parsed.rows = [[cell.strip() for cell in row] for row in parsed.rows]
    return parsed


def test_home_lists_the_windows_signatures_most_crashes_first_with_a_trend(ui, fleet):
    week = table(_get(ui, "/"), "top")
    listed = {row[0]: int(row[2]) for row in week.rows[1:]}
    assert listed == {hash_: count for hash_, count in fleet.counts.items() if hash_ != fleet.old}
    assert [int(row[2]) for row in week.rows[1:]] == sorted(listed.values(), reverse=True)
    assert f"/signature/{fleet.main}" in week.links
    every = table(_get(ui, "/?since=all"), "top")
    assert {row[0] for row in every.rows[1:]} == set(fleet.counts)
    trend = re.findall(r'<svg class="spark".*?<title>([\d, ]+)</title>', _get(ui, "/?since=all"))
    assert sorted(sum(map(int, t.split(", "))) for t in trend) == sorted(fleet.counts.values())


def test_the_signature_page_shows_the_fleet_its_history_siblings_owner_and_crashes(ui, fleet):
    page = _get(ui, f"/signature/{fleet.main}")
    facets = table(page, "facets").rows
    assert all(host in str(facets) for host in fleet.hosts)
    # a field no crash of the fleet records is named once as unknown, not shown as varying
    assert "xid" not in [row[0] for row in facets]
    assert "xid" in page.split('id="unknown-facets"', 1)[1].split("</p>", 1)[0]
    assert "2-3 h (1)" in str(facets)  # uptimes as hours, as every view shows them
    history = page.split('id="history"', 1)[1].split('id="uptime"', 1)[0]  # the uptime has bars too
    bars = re.findall(r'<rect class="bar"[^>]*><title>[^<]*: (\d+)</title>', history)
    assert sum(map(int, bars)) == fleet.counts[fleet.main]
    assert table(page, "siblings").links == [f"/signature/{fleet.sibling}"]
    crashes = table(page, "crashes")
    assert len(crashes.rows) - 1 == fleet.counts[fleet.main]
    assert f"/crash/{fleet.fault_id}" in crashes.links
    owner = fleet.owner
    assert owner is not None and owner.fix is not None
    for fact in (owner.artifact, owner.version, owner.fix_status, owner.fix.fixed_in,
                 owner.fix.link):
        assert fact in page
    uptime = page.split('id="uptime"', 1)[1].split("</div>", 1)[0]  # every crash records its uptime
    assert sum(map(int, re.findall(r"<title>[^<]*: (\d+)</title>", uptime))) == \
        fleet.counts[fleet.main]


def test_the_uptime_histogram_counts_every_hour_past_the_facets_listed_values(index_address):
    """The facet lists MAX_VALUES hours; the histogram counts every crash whose uptime is known."""
    from crashlab.index.facets import MAX_VALUES
    from crashlab.index.records import FleetFacts

    hours = range(MAX_VALUES + 4)
    with Index(index_address) as index:
        for hour in hours:
            index.record(crash(f"up{hour}", A_SIGNATURE, 100.0 + hour,
                               facts=FleetFacts(uptime_s=hour * 3600 + 60)))
    server = UiServer(index_address)
    try:
        page = _get(server, f"/signature/{A_SIGNATURE.hash}")
    finally:
        server.stop()
    uptime = page.split('id="uptime"', 1)[1].split("</div>", 1)[0]
    bars = [int(n) for n in re.findall(r"<title>[^<]*: (\d+)</title>", uptime)]
    assert sum(bars) == len(hours) and bars.count(1) == len(hours)  # each hour its own bar


def test_a_damaged_run_report_is_no_triage_on_the_crash_and_signature_pages(ui, fleet,
                                                                            tmp_path):
    """A run's report.json that is not a RunReport (cut short, hand-edited) is read as none."""
    report = tmp_path / "run-1" / "report.json"
    assert fleet.replay in _get(ui, f"/crash/{fleet.fault_id}")  # the seeded report is read
    seeded = json.loads(report.read_text(encoding="utf-8"))
    seeded["incidents"][0]["replay_commands"] = 7  # one field of the seeded report damaged
    for damaged in [*DAMAGED_RUN_REPORTS, json.dumps(seeded)]:
        report.write_text(damaged, encoding="utf-8")
        page = _get(ui, f"/crash/{fleet.fault_id}")
        assert "No triage: the crash's report cannot be read now" in page, damaged
        assert fleet.replay not in page
        assert f"/crash/{fleet.fault_id}" in table(_get(ui, f"/signature/{fleet.main}"),
                                                   "crashes").links


def test_a_crash_id_past_64_bits_is_not_found(ui):
    for crash_id in (2**63, 99999999999999999999999):
        for path in (f"/crash/{crash_id}", f"/crash/{crash_id}/incident",
                     f"/crash/{crash_id}/file/0"):
            _get(ui, path, status=404)


def test_a_coarse_keys_page_lists_the_signatures_under_it_most_crashes_first(ui, fleet):
    signature_page = _get(ui, f"/signature/{fleet.main}")
    coarse = re.search(r'<a href="/signature/(\w+)">\1</a></td></tr>', signature_page)[1]
    rows = table(_get(ui, f"/signature/{coarse}"), "signatures").rows[1:]
    assert [(row[0], int(row[1])) for row in rows] == [
        (fleet.main, fleet.counts[fleet.main]), (fleet.sibling, fleet.counts[fleet.sibling])]


def test_the_crash_page_shows_the_triage_with_the_faulting_sass_line_files_and_replay(ui, fleet):
    page = _get(ui, f"/crash/{fleet.fault_id}")
    sass = table(page, "sass")
    marked = [row for row in sass.rows if row[0] == ">>"]
    assert len(marked) == 1 and "ATOMS" in marked[0][2]
    assert 'id="explanation"' in page and "moe_align_block_size" in page
    assert fleet.replay in page and f"crashlab debug {fleet.core_in_run}" in page
    files = table(page, "files")
    assert files.links == [f"/crash/{fleet.fault_id}/file/0"]
    download = requests.get(ui.url + files.links[0], timeout=60)
    assert download.content == fleet.core_in_run.read_bytes()
    assert "attachment" in download.headers["Content-Disposition"]
    again = _get(ui, f"/crash/{fleet.alone_id}")  # no run, no kept triage: its coredump read
    assert len([row for row in table(again, "sass").rows if row[0] == ">>"]) == 1
    assert "not kept: the index is read-only here" in again


@pytest.mark.parametrize("path", ["/crash/{id}/file/1", "/crash/{id}/file/-1",
                                  "/crash/{id}/file/..%2f..%2fetc%2fpasswd",
                                  "/crash/{id}/file/0/../../../../etc/passwd", "/crash/99999",
                                  "/signature/ffffffffffff", "/crash/99999/incident"])
def test_only_what_the_index_lists_is_served(ui, fleet, path):
    response = requests.get(ui.url + path.format(id=fleet.fault_id), timeout=60)
    assert response.status_code == 404
    assert "root:" not in response.text


def test_a_window_that_is_neither_an_age_nor_a_date_is_a_bad_request(ui):
    response = requests.get(ui.url + "/?since=<b>soon</b>", timeout=60)
    assert response.status_code == 400 and "<b>soon</b>" not in response.text
    assert "&lt;b&gt;soon&lt;/b&gt;" in response.text


def _as_if_to(url: str, host: str) -> requests.Response:
    """GET ``url`` with a Host header naming ``host``, as a browser does for the page's name."""
    return requests.get(url, headers={"Host": host}, timeout=60)


def test_a_page_reached_by_another_name_is_refused(ui, fleet):
    """DNS rebinding: a site's name pointed at 127.0.0.1 reaches the server with that name as
    Host; only this machine's loopback names on the server's port are answered."""
    port = urlsplit(ui.url).port
    for name in ("127.0.0.1", "localhost", "[::1]"):
        assert _as_if_to(f"{ui.url}/signature/{fleet.main}", f"{name}:{port}").status_code == 200
    for host in (f"rebind.example:{port}", f"127.0.0.1.rebind.example:{port}",
                 f"localhost:{port + 1}", "localhost", ""):
        for path in ("/", f"/signature/{fleet.main}", f"/crash/{fleet.fault_id}/file/0"):
            refused = _as_if_to(ui.url + path, host)
            assert refused.status_code == 400, (host, path)
            assert fleet.main not in refused.text and fleet.hosts[0] not in refused.text


def test_the_incident_page_puts_the_first_failure_first_then_collateral_then_xid(ui, fleet):
    page = _get(ui, f"/crash/{fleet.collateral_id}/incident")
    rows = table(page, "timeline").rows[1:]
    assert [row[1] for row in rows] == ["FAULT", "COLLATERAL", "Xid 79"]
    assert rows[0][2] == fleet.hosts[0] and fleet.xid_text in rows[2][4]
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)


def test_no_route_writes_and_the_index_is_opened_read_only(ui, fleet):
    assert requests.post(ui.url + "/", timeout=30).status_code == 405
    reader = Index(fleet.address, create=False, read_only=True)
    with reader, pytest.raises(reader.backend.errors):
        reader.record(crash("written", signature("f0" * 6), 1.0))
    with Index(fleet.address, create=False) as index:
        assert index.backend.execute("SELECT count(*) FROM crashes").fetchone()[0] \
            == sum(fleet.counts.values())


def test_another_address_than_this_machines_needs_public_and_warns(tmp_path):
    address = str(tmp_path / "index.sqlite")
    with Index(address) as index:
        index.record(crash("one", signature("f1" * 6), 1.0))
    refused = run_cli("ui", "--db", address, "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2 and b"--public" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    server = UiServer(address, "--host", "0.0.0.0", "--public")
    try:
        assert any("warning" in line and "no login" in line for line in server.said)
        port = urlsplit(server.url).port
        assert _as_if_to(server.url, f"{socket.gethostname()}:{port}").status_code == 200
        assert _as_if_to(server.url, f"rebind.example:{port}").status_code == 400
    finally:
        server.stop()


def test_without_the_ui_extra_it_says_which_in_one_line_and_exits_3(tmp_path):
    address = str(tmp_path / "index.sqlite")
    with Index(address) as index:
        index.record(crash("one", signature("f2" * 6), 1.0))
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['werkzeug'] = None; "
         "from crashlab.cli import main; sys.argv = ['crashlab', 'ui', '--db', sys.argv[1]]; "
         "main()", address], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        "crashlab: crashlab ui needs werkzeug: pip install 'crashlab[ui]'"]


def test_the_signature_page_renders_the_facets_their_readings_and_the_uptime_histogram(fleet):
    """Shown.facets as crashlab.index.facets fills them (constructed here, to the contract),
    rendered by the signature page's template: constant and varying fields, each value and count,
    each reading with its evidence, and the uptime at crash as a histogram in hours."""
    from crashlab.index.records import Facet, Facets, FacetValue, Reading
    from crashlab.ui import pages
    from crashlab.ui.app import templates

    uptimes = {3600 * 2: 3, 3600 * 30: 4, 3600 * 50: 1}
    facets = Facets(crashes=8, fields=[
        Facet(name="pc", constant=True, known=8, values=[FacetValue(value="0x210", count=8)]),
        Facet(name="host", constant=False, known=8,
              values=[FacetValue(value=host, count=3) for host in fleet.hosts[:2]], others=2),
        Facet(name="uptime_s", constant=False, known=8,
              values=[FacetValue(value=str(s), count=n) for s, n in uptimes.items()])],
        readings=[Reading(kind="not-one-device", text="same PC, many hosts: not one bad device",
                          evidence=["pc 0x210 on all 8", "3 hosts"])])
    with Index(fleet.address, create=False, read_only=True) as index:
        page = pages.signature_page(index, fleet.main)
    page.facets = facets
    page.uptime = pages.uptime_chart([(s // 3600, n) for s, n in uptimes.items()])
    html = templates().get_template("signature.html").render(page=page)
    rows = {row[0]: row[1:] for row in table(html, "facets").rows[1:]}
    assert rows["pc"] == ["constant", "0x210 (8)"]
    assert rows["host"][0] == "varies" and rows["host"][1].endswith("2 more")
    assert all(f"{host} (3)" in rows["host"][1] for host in fleet.hosts[:2])
    assert "same PC, many hosts: not one bad device" in html and "pc 0x210 on all 8" in html
    uptime = html.split('id="uptime"')[1].split("</div>")[0]
    bars = [int(n) for n in re.findall(r"h: (\d+)</title>", uptime)]
    assert sum(bars) == sum(uptimes.values()) and bars[0] == uptimes[3600 * 2]
    assert bars[-1] == uptimes[3600 * 50]


def test_a_python_crash_serve_caught_shows_its_triage_from_the_run_report(tmp_path, xdg_data_home):
    """A scheduler exception caught by the real ``crashlab serve`` around the stand-in SGLang
    (tests/standin), whose rank left a COLLATERAL dump (no exception, its warps parked),
    recorded into the default index: its page shows the dump's triage and, beside it, the run's
    incident: the exception, the traceback's frames and the run's files."""
    from tests.serve_harness import FAST, Serve, environment, free_port, sglang

    serve = Serve(tmp_path, sglang(free_port()), *FAST, "--quiet",
                  env={**environment(crash="scheduler-exception", crash_on="start"), "CRASHLAB_DB": ""})
    assert serve.finish() == 0, serve.stderr
    address = str(xdg_data_home / "crashlab" / "index.sqlite")
    server = UiServer(address)
    try:
        with Index(address) as index:
            [crash] = [c for c in map(index.crash, range(1, 10)) if c is not None]
        page = _get(server, f"/crash/{crash.id}")
    finally:
        server.stop()
    assert "No triage" not in page
    assert 'id="triage-summary"' in page and "Where warps stand" in page  # the dump's, found
    assert 'id="incident-summary"' in page  # under its run directory, and the incident beside it
    assert "Scheduler hit an exception" in page or "RuntimeError" in page
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in page
    assert "scheduler_exception" in page  # the traceback's own frame, from the stand-in rank
    assert any("stderr.log" in cell for row in table(page, "files").rows for cell in row)


def test_the_crash_page_shows_params_suspects_registers_owner_words_sizes_and_debug(ui, fleet):
    page = _get(ui, f"/crash/{fleet.fault_id}")
    facts_table = table(page, "facts")
    assert any(row[0] == "host" for row in facts_table.rows)
    fault = _HTML(page)
    assert "params" in fault.headers and "#0 " in page  # the kernel's arguments
    assert "Registers of lane" in page and "R0=0x" in page
    assert fleet.owner is not None and fleet.owner.fix is not None
    owner = re.search(r'<td id="owner">(.*?)</td>', page, re.S).group(1)
    assert f"a fix is in {fleet.owner.fix.artifact} {fleet.owner.fix.fixed_in}" in owner
    assert "fixed-in-later" not in owner and "no-known-fix" not in owner  # words, not the enum
    size = fleet.core_in_run.stat().st_size
    assert any(f"({size:,} bytes)" in cell or f"{size:,} bytes" in cell
               for row in table(page, "files").rows for cell in row)
    replay = re.search(r'<pre id="replay">(.*?)</pre>', page, re.S).group(1)
    debug = re.search(r'<pre id="debug">(.*?)</pre>', page, re.S).group(1)
    assert "crashlab debug" not in replay and f"crashlab debug {fleet.core_in_run}" in debug


class _HTML(HTMLParser):
    """The text of every th of a page."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.headers: list[str] = []
        self._in = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self._in = tag == "th"

    def handle_data(self, data):
        if self._in:
            self.headers.append(data)
            self._in = False


@pytest.mark.parametrize("path, status, words", [
    ("/no/such/page", 404, "Not Found"),
    ("/?since=yesterday", 400, "since takes an age (2h, 3d), an ISO date"),
])
def test_errors_are_the_uis_own_pages_and_the_log_has_no_colour(ui, path, status, words):
    response = requests.get(ui.url + path, timeout=60)
    assert response.status_code == status and words in response.text
    assert "crashlab ui</a>" in response.text  # the ui's own header, not werkzeug's bare page
    logged = ui.logged(path.split("?")[0])
    assert path.split("?")[0] in logged and "\x1b[" not in logged  # stderr is a pipe here


def test_the_favicon_a_browser_asks_for_is_no_404(ui):
    response = requests.get(ui.url + "/favicon.ico", timeout=60)
    assert response.status_code == 204 and not response.content
    logged = ui.logged("/favicon.ico").splitlines()
    assert any("/favicon.ico" in line for line in logged)  # its log line came, and
    assert not any("favicon" in line and '" 404 ' in line for line in logged)
