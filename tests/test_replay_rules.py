"""The loader's rule: a name is inert, a call is judged; and token ids read in bulk stay exact.

Programs are written opcode by opcode (tests/test_replay_hostile.py's helpers) where the shape
matters, and with the stdlib pickler of this Python where the point is "what CPython writes".
The dumps SGLang itself wrote are tested in tests/test_real_sglang_dumps.py.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
import struct
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from crashlab.picklesafe import intruns, unpickler
from crashlab.picklesafe.allowlist import Global
from crashlab.picklesafe.intruns import TokenIds
from crashlab.picklesafe.opcodes import PickleRefused
from crashlab.picklesafe.pickled import Instance
from crashlab.replay.records import plain
from tests.test_replay_hostile import glob, op, program, text

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def as_python(value):
    """Our decoded value with TokenIds back as the list or tuple they stand for."""
    if type(value) is TokenIds:
        return tuple(value) if value.was_tuple else value.tolist()
    if type(value) in (list, tuple):
        return type(value)(as_python(item) for item in value)
    if type(value) is dict:
        return {key: as_python(item) for key, item in value.items()}
    return value


# -- names are inert, calls are judged ---------------------------------------------------------

def test_an_enum_is_a_record_of_its_value():
    value = unpickler.loads(program(glob("sglang.srt.layers.attention", "AttentionArch"),
                                    op("BININT1", b"\x02"), op("TUPLE1"), op("REDUCE")))
    assert type(value) is Instance and value.cls.qualified.endswith("AttentionArch")
    assert value.fields() == {"value": 2}


def test_a_torch_dtype_is_a_name_and_calling_it_is_refused():
    value = unpickler.loads(program(glob("torch", "bfloat16")))
    assert value == Global("torch", "bfloat16", "value")
    assert plain({"dtype": value}) == {"dtype": {"__global__": "torch.bfloat16"}}
    with pytest.raises(PickleRefused, match="REDUCE calls torch.bfloat16, which is a value"):
        unpickler.loads(program(glob("torch", "bfloat16"), op("EMPTY_TUPLE"), op("REDUCE")))


@pytest.mark.parametrize("module, name", [
    ("transformers_modules.my_model.configuration_mine", "MineConfig"),
    ("transformers.models.llama.configuration_llama", "LlamaConfig"),
    ("sglang.srt.model_executor.cuda_graph_config", "CudaGraphConfig"),
])
def test_classes_of_sglang_and_hugging_face_become_records(module, name):
    state = op("EMPTY_DICT") + op("MARK") + text("hidden_size") + op("BININT2", b"\x00\x10") + \
        text("torch_dtype") + glob("torch", "bfloat16") + op("SETITEMS")
    value = unpickler.loads(program(glob(module, name), op("EMPTY_TUPLE"), op("NEWOBJ"), state,
                                    op("BUILD")))
    assert value.cls.qualified == f"{module}.{name}"
    assert plain(value) == {"__class__": f"{module}.{name}", "hidden_size": 4096,
                            "torch_dtype": {"__global__": "torch.bfloat16"}}


@pytest.mark.parametrize("module, name", [
    ("torch", "load"), ("torch.serialization", "load"), ("numpy", "frombuffer"),
    ("transformers", "AutoConfig.from_pretrained"), ("sglang.srt.utils", "kill_process_tree"),
    ("sglang.srt.server_args", "ServerArgs.__reduce__"), ("sglangx", "ServerArgs"),
    ("transformers_modules.evil", "Config.__init__.__globals__"),
])
def test_functions_and_attribute_paths_are_refused_by_name(module, name):
    with pytest.raises(PickleRefused, match=f"it names {module}.{name}"):
        unpickler.loads(program(glob(module, name), op("EMPTY_TUPLE"), op("REDUCE")))


def test_copyreg_reconstructor_makes_a_record_only_in_its_own_shape():
    cls = glob("sglang.srt.configs.model_config", "ModelConfig")
    good = program(glob("copyreg", "_reconstructor"), cls, glob("builtins", "object"), op("NONE"),
                   op("TUPLE3"), op("REDUCE"), op("EMPTY_DICT"), text("a"), op("BININT1", b"\x01"),
                   op("SETITEM"), op("BUILD"))
    value = unpickler.loads(good)
    assert value.cls.name == "ModelConfig" and value.fields() == {"a": 1}
    bad = program(glob("copyreg", "_reconstructor"), cls, glob("builtins", "list"), op("NONE"),
                  op("TUPLE3"), op("REDUCE"))
    with pytest.raises(PickleRefused, match="unexpected shape"):
        unpickler.loads(bad)


def test_a_defaultdict_is_a_dict():
    value = unpickler.loads(program(glob("collections", "defaultdict"), glob("builtins", "list"),
                                    op("TUPLE1"), op("REDUCE"), op("MARK"), text("k"),
                                    op("EMPTY_LIST"), op("SETITEMS")))
    assert value == {"k": []}


# Classes of the kinds SGLang's configs are made of, pickled by this Python's own pickler. They
# live in a throwaway module under the sglang namespace for the length of the test only.
class _Arch(enum.Enum):
    MLA = "mla"
    MHA = "mha"


@dataclasses.dataclass
class _Holder:
    arch: _Arch
    phase: object
    sizes: list
    extra: dict = dataclasses.field(default_factory=dict)


class _Phase(BaseModel):
    chunk: int = 8
    name: str = "prefill"


@pytest.fixture
def sglang_namespace_module():
    package = sys.modules.get("sglang") or types.ModuleType("sglang")
    module = types.ModuleType("sglang.crashlab_test_kinds")
    for cls in (_Arch, _Holder, _Phase):
        setattr(module, cls.__name__, cls)
        cls.__module__ = module.__name__
    added = {name: made for name, made in (("sglang", package), (module.__name__, module))
             if name not in sys.modules}
    sys.modules.update(added)
    yield module
    for name in added:
        del sys.modules[name]
    for cls in (_Arch, _Holder, _Phase):
        cls.__module__ = __name__


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_what_cpython_writes_for_enums_dataclasses_and_pydantic(sglang_namespace_module, protocol):
    data = pickle.dumps(_Holder(_Arch.MHA, _Phase(chunk=16), list(range(40)), {"k": (1, 2)}),
                        protocol=protocol)
    value = unpickler.loads(data)
    fields = value.fields()
    assert fields["arch"].fields() == {"value": "mha"}
    assert fields["phase"].fields() == {"chunk": 16, "name": "prefill"}
    assert fields["sizes"] == list(range(40)) and type(fields["sizes"]) is TokenIds
    assert fields["extra"] == {"k": (1, 2)}


# -- token ids in bulk -------------------------------------------------------------------------

values = st.recursive(
    st.one_of(INT32, st.integers(), st.text(max_size=5), st.none(), st.booleans(),
              st.floats(allow_nan=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=40), st.lists(INT32, max_size=3000),
                            st.tuples(inner, inner), st.lists(INT32, max_size=50).map(tuple),
                            st.dictionaries(st.text(max_size=4), inner, max_size=5)),
    max_leaves=60)


@settings(max_examples=150, deadline=None)
@given(value=values, protocol=st.sampled_from([2, 3, 4, 5]))
def test_bulk_integer_runs_decode_exactly(value, protocol):
    data = pickle.dumps(value, protocol=protocol)
    assert as_python(unpickler.loads(data)) == pickle.loads(data)


def test_long_lists_across_frames_and_batches():
    ids = [(index * 7919) % 150_000 for index in range(70_001)]  # BININT1/2 and BININT, mixed
    data = pickle.dumps({"input_ids": ids, "t": tuple(ids[:5000])}, protocol=4)
    assert data.count(b"\x95") >= 4  # several 64 KiB frames fall inside the runs
    value = unpickler.loads(data)
    assert type(value["input_ids"]) is TokenIds and value["input_ids"] == ids
    assert type(value["t"]) is TokenIds and value["t"].was_tuple and value["t"] == tuple(ids[:5000])


@pytest.mark.parametrize("compiled", [True, False])
def test_token_ids_of_a_small_vocabulary_take_two_bytes_each(monkeypatch, compiled):
    """Ids below 65,536 (a 32k or 64k vocabulary: 3 bytes a token in the file) are kept as
    uint16s, half of an int32, whether the C helper or the Python walk reads them; one id past
    it, or a negative one, anywhere in a list read in several APPENDS batches, widens the whole
    list to int32s, values unchanged."""
    if compiled and not intruns.compiled():
        pytest.skip("the C helper was not built")
    if not compiled:
        monkeypatch.setattr(intruns, "_compiled_run", None)
    small = [(index * 7919) % 32_000 for index in range(5000)]
    value = unpickler.loads(pickle.dumps({"ids": small, "t": tuple(small[:300])}, protocol=4))
    assert value["ids"] == small and value["ids"].itemsize == 2
    assert value["t"] == tuple(small[:300]) and value["t"].itemsize == 2
    for odd in (70_000, -1):
        mixed = small[:2500] + [odd] + small[2500:]  # a wide id in the third batch of 1,000
        value = unpickler.loads(pickle.dumps(mixed, protocol=4))
        assert type(value) is TokenIds and value == mixed and value.itemsize == 4


def test_a_shared_list_stays_one_object():
    ids = list(range(300, 400))
    value = unpickler.loads(pickle.dumps([ids, ids, {"again": ids}], protocol=4))
    assert value[0] is value[1] is value[2]["again"] and type(value[0]) is TokenIds


def test_the_python_walk_matches_the_compiled_one(monkeypatch):
    ids = [(index * 104729) % (1 << 31) for index in range(5000)]
    data = pickle.dumps([ids, tuple(ids[:100]), [1, "x", 2]], protocol=4)
    compiled = as_python(unpickler.loads(data))
    monkeypatch.setattr(intruns, "_compiled_run", None)
    assert as_python(unpickler.loads(data)) == compiled == [ids, tuple(ids[:100]), [1, "x", 2]]


@pytest.mark.skipif(not intruns.compiled(), reason="the C helper was not built")
@pytest.mark.parametrize("run, expected", [
    (b"K\x01K\x02\x95" + struct.pack("<Q", 1 << 40) + b"K\x03", ([1, 2], 4)),  # forged frame
    (b"K\x01K\x02M\x01", ([1, 2], 4)),  # a BININT2 cut short at the end of the buffer
    (b"K\x01J\x01\x02", ([1], 2)),  # a BININT cut short
    (b"M\x01\x02J\xff\xff\xff\xffe", ([513, -1], 8)),  # stops at APPENDS; BININT is signed
])
def test_the_compiled_walk_stops_at_anything_it_cannot_vouch_for(run, expected):
    ids, end = intruns.run(run, 0)
    python_ids, python_end = intruns.python_run(run, 0)
    assert (list(ids), end) == (list(python_ids), python_end) == expected


def test_a_truncated_run_is_refused_as_truncated():
    data = pickle.dumps(list(range(1000, 3000)), protocol=4)
    with pytest.raises(PickleRefused, match="truncated"):
        unpickler.loads(data[:len(data) // 2])


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.sampled_from([None, True, False, 0, 7, "x", 300]), min_size=6,
                              max_size=6), min_size=2, max_size=30),
       memo_before=st.sampled_from([0, 300]))
def test_runs_of_constant_fields_decode_exactly(rows, memo_before):
    """Dicts sharing their key objects (as a dataclass's instances do): later ones name their
    keys by BINGET (by LONG_BINGET past 256 memo entries, as after a real ServerArgs), and runs
    of (key, None/True/False) are pushed in one go."""
    keys = [f"field_{index}" for index in range(6)]
    value = [f"filler {index}" for index in range(memo_before)]
    value += [dict(zip(keys, row, strict=True)) for row in rows]
    data = pickle.dumps(value, protocol=4)
    assert as_python(unpickler.loads(data)) == value


@pytest.mark.parametrize("get, width", [("BINGET", "<B"), ("LONG_BINGET", "<I")])
def test_a_constant_field_run_naming_an_unwritten_memo_entry_is_refused(get, width):
    data = program(op("EMPTY_DICT"), op("MARK"), text("a"), op("MEMOIZE"), op("NONE"),
                   op(get, struct.pack(width, 0)), op("NONE"), op(get, struct.pack(width, 7)),
                   op("NEWTRUE"), op("SETITEMS"))
    with pytest.raises(PickleRefused, match="memo entry 7 is read before it is written"):
        unpickler.loads(data)
