"""The two libraries stay libraries: crashlab.picklesafe (the safe pickle reader) and
crashlab.privacy (redaction and anonymization) import only each other's package-mates and the
small leaves below them, never a verb or the model they serve, so that the reader of strangers'
pickles and the maskers of secrets can be read, reviewed and reused on their own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.architecture import LAYERS, ROOT, circles, read_graph, unit_of

LIBRARIES = ("picklesafe", "privacy")
#: The units below the libraries in the layer order: words and small leaves.
LEAVES = set(LAYERS[: LAYERS.index(LIBRARIES[0])])


@pytest.fixture(scope="module")
def graph():
    return read_graph()


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_library_imports_only_itself_and_leaves(graph, library):
    modules = [module for module in graph.edges if unit_of(module) == library]
    assert modules, f"no module of crashlab.{library} imports anything: is it still there?"
    above = sorted(f"{module} -> {target}" for module in modules for target in graph.edges[module]
                   if unit_of(target) not in LEAVES | {library})
    assert not above


def test_no_module_circle_in_the_reader_or_replay(graph):
    found = [circle for circle in circles(graph.edges)
             if {unit_of(module) for module in circle} & {"picklesafe", "privacy", "replay"}]
    assert not found


#: Each library at work in a fresh interpreter: a pickle decoded, checked and written back; a
#: launch's secret masked and its host renamed.
AT_WORK = {
    "picklesafe": (
        "import pickle\n"
        "from crashlab.picklesafe import bounds, unpickler, writer\n"
        "value = unpickler.loads(pickle.dumps({'ids': [1, 2, 3], 'text': 'x'}, 4), 'test')\n"
        "bounds.check(value, 100, 'test')\n"
        "assert unpickler.loads(writer.dumps(value), 'again') == value\n"),
    "privacy": (
        "from crashlab.privacy.policy import Privacy\n"
        "argv = ['sglang', '--api-key', 's3cr3tvalue', '--host', 'gpu7.corp.internal']\n"
        "privacy = Privacy.for_launch(argv, {}, True, [], [])\n"
        "masked, host = privacy.text('s3cr3tvalue gpu7.corp.internal').split()\n"
        "assert masked == '***' and host.startswith('host-') and host.endswith('.example')\n"),
}


@pytest.mark.parametrize("library", LIBRARIES)
def test_at_work_a_library_loads_nothing_of_crashlab_above_it(library):
    """What the graph cannot see (an import inside a function): the crashlab packages loaded
    once the library has done its work."""
    code = AT_WORK[library] + (
        "import sys\n"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('crashlab.')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    loaded = set(eval(out.stdout))
    assert library in loaded and loaded <= LEAVES | {library}, loaded
