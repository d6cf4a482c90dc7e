"""The house keeps its shape: imports run down the declared layer order (tests/architecture.py's
LAYERS), no packages import each other in a circle, the published model stands without the
coredump reader, the shared words live in leaves, and every model crashlab writes has one base.

The import graph is read from the source with ast; nothing below imports crashlab except the
tests that say so (the published model's start-up, in a fresh interpreter; the models' base).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from pydantic import BaseModel, ValidationError

from crashlab import logpatterns, vocabulary
from crashlab.errors import BadInput
from crashlab.published import ClosedModel
from tests.architecture import (
    LAYERS,
    arrows_back_up,
    circles,
    read_graph,
    sql_outside,
    undeclared_units,
)
from tests.conftest import ROOT

#: Arrows back up the layer order a refactor may leave: at most this many.
MOST_ARROWS_BACK_UP = 2
CRASH_DUMP = ROOT / "fixtures" / "sglang_dumps" / "crash_dump_0.5.23.pkl"
CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"


@pytest.fixture(scope="module")
def graph():
    return read_graph()


def test_the_graph_is_read_from_the_source(graph):
    """The rules below hold of a real graph: a known import is in it, seen the way it is written."""
    assert "crashlab.report.signature" in graph.edges["crashlab.report.model"]  # from .signature
    assert "crashlab.vocabulary" in graph.edges["crashlab.errors"]  # from .vocabulary import
    assert "crashlab.coredump.elf" in graph.edges["crashlab.replay.loader"]  # inside a function


def test_every_unit_is_declared_in_the_layers(graph):
    assert not undeclared_units(graph), "add them to tests/architecture.py's LAYERS at their height"
    assert len(set(LAYERS)) == len(LAYERS)


def test_imports_run_down_the_layers(graph):
    up = arrows_back_up(graph)
    assert len(up) <= MOST_ARROWS_BACK_UP, "arrows back up:\n" + "\n".join(
        f"  {low} -> {high}: {', '.join(why)}" for low, high, why in up)


def test_no_sql_lives_outside_the_index():
    """crashlab.index owns the database: every query is its own, and the rest of crashlab asks it
    for typed records (the web view too)."""
    assert sql_outside("index") == []


def test_sql_is_found_wherever_it_is_written(tmp_path):
    """The scan above finds SQL in a plain string, split over lines, in an f-string and in a
    docstring; and the index's own SQL is found when the index is not its owner."""
    package = tmp_path / "crashlab"
    (package / "ui").mkdir(parents=True)
    (package / "ui" / "page.py").write_text(
        '"""Reads it with DELETE FROM crashes."""\n'
        'a = "SELECT id FROM crashes WHERE host = ?"\n'
        'b = ("SELECT count(*), "\n     "max(crashed_at) FROM crashes")\n'
        'c = f"UPDATE crashes SET {column} = ?"\n'
        'd = "select the newest, from the crashes"  # words, not SQL\n', encoding="utf-8")
    assert [hit.split(":")[1] for hit in sql_outside("index", package)] == ["1", "2", "3", "5"]
    assert len(sql_outside("tests", ROOT / "crashlab")) > 20


def test_no_packages_import_each_other_in_a_circle(graph):
    assert circles(graph.units()) == []


@pytest.mark.parametrize("leaf", ["crashlab.vocabulary", "crashlab.logpatterns"])
def test_the_shared_words_are_leaves(graph, leaf):
    assert graph.edges.get(leaf, set()) == set()


def test_the_published_model_loads_without_the_reader():
    """`import crashlab.report.model` (what a consumer of report.json imports) in a fresh
    interpreter: no module of the coredump reader comes with it."""
    shown = subprocess.run(
        [sys.executable, "-c", "import sys, crashlab.report.model, crashlab.report.run; "
                               "print('\\n'.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert "crashlab.report.model" in shown
    assert [name for name in shown if name.startswith("crashlab.coredump")] == []


def test_the_log_patterns_find_the_vocabularys_finding_kinds():
    found = {line.kind for line in logpatterns.PATTERNS}
    assert found | {vocabulary.TRACEBACK} == set(vocabulary.FINDING_KINDS)


@pytest.mark.parametrize(("read", "path", "kind"), [
    ("crashlab.api:inspect", CRASH_DUMP, vocabulary.InputKind.PICKLE),
    ("crashlab.replay.loader:load", CORE, vocabulary.InputKind.COREDUMP),
])
def test_a_reader_says_what_another_verbs_file_is_not_which_verb(read, path, kind):
    """The verb to use is the command line's advice (crashlab.wrongverb); the reader says what
    the file is, with the kind the command line turns into advice."""
    module, name = read.split(":")
    with pytest.raises(BadInput) as refused:
        getattr(importlib.import_module(module), name)(path)
    assert refused.value.kind is kind and refused.value.subject == str(path)
    said = str(refused.value)
    assert said.startswith(f"{path}: a") and "crashlab" not in said.removeprefix(str(path))


def _subclasses(model: type) -> set[type]:
    found = set(model.__subclasses__())
    return found.union(*(_subclasses(sub) for sub in found))


def test_every_model_crashlab_writes_has_the_one_base():
    from crashlab.cli.schema import SCHEMAS

    for where in SCHEMAS.values():
        importlib.import_module(where.split(":")[0])
    ours = {model for model in _subclasses(BaseModel) if model.__module__.startswith("crashlab.")}
    assert len(ours) > 50
    assert sorted(m.__qualname__ for m in ours if not issubclass(m, ClosedModel)) == []


def test_the_base_is_closed_and_reads_descriptions_from_docstrings():
    class Sample(ClosedModel):
        size: int
        """bytes on disk"""

    assert Sample.model_json_schema()["properties"]["size"]["description"] == "bytes on disk"
    with pytest.raises(ValidationError):
        Sample(size=1, unknown=2)


def test_contributing_names_every_layer_in_its_layer_order():
    """CONTRIBUTING.md's layer order is prose beside LAYERS: a unit added to one is added to both."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## The layer order", 1)[1].split("\n## ", 1)[0]
    assert [unit for unit in LAYERS if f"`{unit}`" not in section] == []
