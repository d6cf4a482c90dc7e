"""crashlab ui in a real browser: Debian's headless Chromium, driven by Selenium through Debian's
chromedriver, reads the pages of a real ``crashlab ui`` over a fleet recorded into a real index;
it follows the links from the home page to a signature and on to a crash and checks what a
person sees there (the facets, the chart, the SASS with its faulting line).

With CRASHLAB_UI_SCREENSHOTS=FOLDER it also saves a screenshot of each page kind there (docs/ui.md
shows them: ``CRASHLAB_UI_SCREENSHOTS=docs/images pytest tests/test_ui_browser.py``).
Without Chromium it skips, saying how to get it; under CI (.ci/run installs it) it fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.ui_fleet import UiServer, facts, seed

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
#: what keeps a headless Chromium from reaching out: the machine has no internet, nor should it
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1200,1000")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (Path(CHROMIUM).exists() and shutil.which(CHROMEDRIVER)):
        why = "no Chromium (apt-get install chromium chromium-driver; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def fleet_ui(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet")
    fleet = seed(str(folder / "index.sqlite"), folder)
    server = UiServer(fleet.address)
    yield fleet, server
    server.stop()


def _shot(browser, name: str) -> None:
    folder = os.environ.get("CRASHLAB_UI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1200, min(max(height + 40, 600), 2400))
        browser.save_screenshot(str(Path(folder) / f"ui-{name}.png"))
        browser.set_window_size(1200, 1000)


def test_a_person_follows_the_home_page_to_a_signature_and_to_a_crash(browser, fleet_ui):
    from selenium.webdriver.common.by import By

    fleet, server = fleet_ui
    browser.get(server.url + "/?since=all")
    rows = browser.find_elements(By.CSS_SELECTOR, "#top tr")[1:]
    assert [row.find_elements(By.TAG_NAME, "td")[0].text for row in rows][0] == fleet.main
    assert all(row.find_element(By.CSS_SELECTOR, "svg.spark").is_displayed() for row in rows)
    _shot(browser, "home")

    browser.find_element(By.LINK_TEXT, fleet.main).click()
    assert browser.current_url.endswith(f"/signature/{fleet.main}")
    fleet_table = browser.find_element(By.ID, "facets")
    assert fleet_table.is_displayed() and all(host in fleet_table.text for host in fleet.hosts)
    seeded = facts(0)  # one PC on every crash, each on a GPU of its own: not one bad device
    assert seeded.pc is not None and seeded.pc in fleet_table.text
    assert "not one bad device" in browser.find_element(By.TAG_NAME, "body").text
    assert browser.find_element(By.CSS_SELECTOR, "#uptime svg").is_displayed()
    chart = browser.find_element(By.CSS_SELECTOR, "#history svg.chart")
    assert chart.is_displayed() and chart.size["width"] > 300 and chart.size["height"] > 100
    bars = chart.find_elements(By.CSS_SELECTOR, "rect.bar")
    assert sum(1 for bar in bars if bar.size["height"] > 0) >= 2
    assert fleet.owner is not None and fleet.owner.fix is not None
    assert fleet.owner.fix.fixed_in in browser.find_element(By.ID, "owner").text
    _shot(browser, "signature")

    browser.find_element(By.CSS_SELECTOR, f'#crashes a[href="/crash/{fleet.fault_id}"]').click()
    assert browser.current_url.endswith(f"/crash/{fleet.fault_id}")
    faulting = browser.find_element(By.CSS_SELECTOR, "#sass tr.faulting")
    assert faulting.is_displayed() and "ATOMS" in faulting.text
    assert faulting.value_of_css_property("background-color") != \
        browser.find_element(By.CSS_SELECTOR, "#sass tr:not(.faulting)").value_of_css_property(
            "background-color")
    assert browser.find_element(By.ID, "explanation").is_displayed()
    _shot(browser, "crash")

    browser.find_element(By.PARTIAL_LINK_TEXT, "inc-").click()
    timeline = browser.find_elements(By.CSS_SELECTOR, "#timeline tr")[1:]
    assert [row.find_elements(By.TAG_NAME, "td")[1].text for row in timeline] == \
        ["FAULT", "COLLATERAL", "Xid 79"]
    _shot(browser, "incident")


#: in a table cell or a heading: a crash id, a 12-character hash, an ISO time; none may break
_TOKENS_BROKEN = """
const pattern = /\\b(?:[0-9a-f]{12}|\\d{4}-\\d\\d-\\d\\dT[\\d:.]+(?:Z|[+-]\\d\\d:\\d\\d)?|\\d+)\\b/g;
const broken = [];
for (const holder of document.querySelectorAll('td, th, h1')) {
  const walker = document.createTreeWalker(holder, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const found of node.data.matchAll(pattern)) {
      const range = document.createRange();
      range.setStart(node, found.index);
      range.setEnd(node, found.index + found[0].length);
      const lines = new Set(Array.from(range.getClientRects(), r => Math.round(r.top)));
      if (lines.size > 1) broken.push(found[0]);
    }
  }
}
return broken;
"""


#: a title, host, rank and summary as long as a real template kernel's name
LONG_NAME = ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<"
             "(flashinfer::MaskMode)1, 128u, 2u, 4u, 8u, 4u, 1u, (flashinfer::PosEncodingMode)0, "
             "__half, __half, __half, float, int, flashinfer::DefaultAttention<false, false, "
             "false, false>>, flashinfer::PagedParams<__half, __half, __half, int>>")


def test_no_table_cell_breaks_an_id_a_hash_or_a_time_at_1280_px(browser, tmp_path):
    """A fleet whose texts from outside are as long as a real template kernel's name squeezes
    the tables: ids, hashes and times still read whole on every page."""
    fleet = seed(str(tmp_path / "index.sqlite"), tmp_path, hostile=LONG_NAME)
    server = UiServer(fleet.address)
    browser.set_window_size(1280, 1000)
    try:
        for path in ("/?since=all", f"/signature/{fleet.main}", f"/crash/{fleet.fault_id}",
                     f"/crash/{fleet.fault_id}/incident", f"/crash/{fleet.alone_id}"):
            browser.get(server.url + path)
            assert browser.execute_script(_TOKENS_BROKEN) == [], path
            # and nothing is pushed past the window's right edge instead
            assert browser.execute_script(
                "return document.documentElement.scrollWidth <= window.innerWidth"), path
    finally:
        browser.set_window_size(1200, 1000)
        server.stop()


#: Every bidirectional control (U+202A-202E, U+2066-2069, U+200E, U+200F, U+061C), then C0 and C1
#: controls (ESC, BEL, C1's CSI), then the right-to-left override again: on a page that wrote it
#: raw, what follows it in its paragraph (the page's own words) would read right to left.
REORDERING = ("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
              "\x1b[2J\x07\x9b\x85\u202e")
#: For each text node of the page, the characters laid out against the order they are written
#: in: two letters on one line (one top) where the later one stands left of the earlier.
_REVERSED = """
const found = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  let last = null;
  for (let i = 0; i < node.data.length; i++) {
    if (/\\s/.test(node.data[i])) { continue; }
    const range = document.createRange();
    range.setStart(node, i);
    range.setEnd(node, i + 1);
    const box = range.getBoundingClientRect();
    if (box.width === 0) { continue; }
    if (last && Math.abs(box.top - last.top) < 1 && box.left < last.left - 0.5) {
      found.push(node.data.slice(Math.max(0, i - 12), i + 12));
      break;
    }
    last = box;
  }
}
return found;
"""


def test_outside_text_cannot_reorder_or_hide_a_pages_facts(browser, tmp_path):
    """Hosts, ranks, titles, summaries and an Xid line ending in a right-to-left override, after
    every bidirectional control and ESC, BEL and C1 controls, on the home, signature, crash and
    incident pages in Chromium: a person sees each as its escapes (\\u202e), no such character
    is in the page's text, and every line of every text reads left to right (the crash's
    "(pid 4242)" after its rank, the timeline's words after its host)."""
    from selenium.webdriver.common.by import By

    hostile = f"node {REORDERING}"
    fleet = seed(str(tmp_path / "index.sqlite"), tmp_path, hostile=hostile)
    server = UiServer(fleet.address)
    try:
        for path in ("/?since=all", f"/signature/{fleet.main}", f"/crash/{fleet.fault_id}",
                     f"/crash/{fleet.fault_id}/incident"):
            browser.get(server.url + path)
            text = browser.find_element(By.TAG_NAME, "body").text
            assert browser.execute_script(_REVERSED) == [], path
            assert not set(REORDERING) - set("[2J") & set(text), path
            assert "\\u202e" in text and "\\x1b[2J\\x07\\x9b\\x85" in text, path
    finally:
        server.stop()
