"""What GitHub makes of crashlab's Markdown: times and numbers shown as they are, emoji
shortcodes still broken, every table with a header row. Rendered with cmark-gfm (GitHub's
renderer); the emoji names are gemoji's (GitHub's list), whose grammar the escaping follows."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from crashlab.api import inspect
from crashlab.report import markdown
from crashlab.report.markdown_escape import inline
from tests.conftest import ROOT
from tests.test_views_hostile import GITHUB_REFERENCE, _github_html

FAULT_CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
#: A break between two digits, or between a colon and a digit: what made 20:<!-- -->57:44.
BROKEN_NUMBER = re.compile(r"\d<!-- -->\d|:<!-- -->\d\d?(?::|\b)")


@pytest.mark.parametrize("text", ["20:57:44", "2026-11-26T21:53:05.265+00:00", "1:2:3", "12:00:00.5",
                                  "0x7fff:0010:22"])
def test_a_time_or_numbers_between_colons_are_written_as_they_are(text):
    assert inline(text) == text


@pytest.mark.parametrize("text", [":tada:", "x:100:y", "a:+1:", "b:-1: ok", "12:1234:5",
                                  ":1st_place_medal:", "20:57:tada:", "::smile::"])
def test_every_shortcode_github_could_show_is_still_broken(text):
    """gemoji's names all hold a letter but 100, 1234, +1 and -1: each is split from its colon."""
    shown = inline(text)
    assert "<!-- -->" in shown and shown.replace("<!-- -->", "") == text
    rendered = _github_html(shown)
    assert not GITHUB_REFERENCE.search(rendered)


class _Tables(HTMLParser):
    """The text of each table header cell."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.headers: list[str] = []
        self._in_th = False

    def handle_starttag(self, tag, attrs):
        if tag == "th":
            self._in_th = True
            self.headers.append("")

    def handle_endtag(self, tag):
        if tag == "th":
            self._in_th = False

    def handle_data(self, data):
        if self._in_th:
            self.headers[-1] += data


def header_cells(body: str) -> list[str]:
    tables = _Tables()
    tables.feed(_github_html(body))
    return tables.headers


def test_a_triages_tables_have_real_headers_and_no_broken_numbers():
    body = markdown.render(inspect(FAULT_CORE))
    headers = header_cells(body)
    assert headers and all(cell.strip() for cell in headers), headers
    assert "| | |" not in body
    assert not BROKEN_NUMBER.search(body)
