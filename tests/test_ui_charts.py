"""The web view's inline SVG plots (crashlab.ui.charts): well-formed SVG a browser draws without
JavaScript, bars and points in proportion to the counts, every label text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crashlab.ui import charts

SVG = "{http://www.w3.org/2000/svg}"


def _parsed(markup: str) -> ET.Element:
    return ET.fromstring(str(markup).replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


@settings(deadline=None)  # a loaded machine stalls an example past any deadline
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40))
def test_bars_are_as_tall_as_their_counts_and_say_them(counts):
    labels = [f"bucket {i}" for i in range(len(counts))]
    svg = _parsed(charts.bars(labels, counts, "crashes over time"))
    rects = svg.findall(f"{SVG}rect")
    assert [int(r.find(f"{SVG}title").text.rsplit(": ", 1)[1]) for r in rects] == counts
    heights = [float(r.get("height")) for r in rects]
    top = max(counts)
    for height, count in zip(heights, counts, strict=True):
        expected = (charts.HEIGHT - charts.LABELS - charts.TOP) * count / top if top else 0.0
        assert height == pytest.approx(expected, abs=0.06)


@settings(deadline=None)  # a loaded machine stalls an example past any deadline
@given(st.lists(st.integers(0, 500), min_size=2, max_size=24))
def test_the_sparklines_highest_point_is_at_the_top_and_it_has_one_point_per_count(counts):
    svg = _parsed(charts.sparkline(counts, height=24))
    points = [tuple(map(float, p.split(","))) for p in
              svg.find(f"{SVG}polyline").get("points").split()]
    assert len(points) == len(counts)
    ys = [y for _, y in points]
    if max(counts):
        assert ys[counts.index(max(counts))] == pytest.approx(2.0)
    assert all(y == pytest.approx(22.0) for y, c in zip(ys, counts, strict=True) if c == 0)


def test_labels_and_captions_are_text_never_markup():
    hostile = '<script>alert(1)</script> & "quoted" ]]>'
    svg = _parsed(charts.bars([hostile, "b"], [1, 2], hostile))
    assert svg.find(f"{SVG}title").text == hostile
    assert svg.find(f"{SVG}text[last()]").text == "b"
    assert not svg.findall(f".//{SVG}script")


def test_one_label_per_bar():
    with pytest.raises(ValueError):
        charts.bars(["a"], [1, 2], "x")
