"""The crash dumps written by REAL SGLang code (fixtures/sglang_dumps/real/) are all there.

They are made by hand with fixtures/sglang_dumps/make_real_dumps.py (real sglang wheels, see
real/PROVENANCE.md). This file only checks that each committed dump has its ``expected.json`` and
that the standard library's pickletools can walk it; the loader's tests read the ground truth in
``expected.json`` themselves. Nothing here imports sglang or unpickles anything.
"""

from __future__ import annotations

import json
import pickletools
from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "sglang_dumps" / "real"

#: Every dump make_real_dumps.py writes; the 0.5.6.post2 one without server_args is an empty
#: file (that release has no retry when ServerArgs cannot be pickled).
DUMPS = [
    "crash_dump_real_0.5.6.post2",
    "crash_dump_real_0.5.6.post2_trust_remote_code",
    "crash_dump_real_0.5.6.post2_no_server_args",
    "crash_dump_real_0.5.12",
    "crash_dump_real_0.5.12_trust_remote_code",
    "crash_dump_real_0.5.12_no_server_args",
    "crash_dump_real_0.5.23",
    "crash_dump_real_0.5.23_trust_remote_code",
    "crash_dump_real_0.5.23_no_server_args",
    "request_dump_real_0.5.23",
]


def test_no_dump_is_left_out_of_the_list():
    assert sorted(p.stem for p in REAL.glob("*.pkl")) == sorted(DUMPS)


@pytest.mark.parametrize("name", DUMPS)
def test_real_dump_has_expected_json_and_walks(name):
    dump = REAL / f"{name}.pkl"
    expected = json.loads((REAL / f"{name}.expected.json").read_text())
    assert expected["file"] == dump.name
    data = dump.read_bytes()
    assert len(data) == expected["size_bytes"]
    if expected.get("empty_file"):
        assert data == b""
        return
    ops = [op.name for op, _arg, _pos in pickletools.genops(data)]
    assert ops[-1] == "STOP"
    assert sorted(set(ops)) == expected["opcodes"]
