"""The exception table: CUDBG codes, names, cuda-gdb's texts and its own numbering."""

from crashlab.coredump import exceptions


def test_cuda_gdb_numbering_differs_for_15_to_18():
    """include/gdb/signals.def: CUDA_EXCEPTION_16 is CUDBG 15, 17 is CUDBG 18, 18 is CUDBG 17."""
    assert exceptions.describe(15).cuda_gdb_signal == 16
    assert exceptions.describe(17).cuda_gdb_signal == 18
    assert exceptions.describe(18).cuda_gdb_signal == 17
    assert exceptions.describe(16).cuda_gdb_signal is None
    assert all(exceptions.describe(code).cuda_gdb_signal == code for code in range(1, 15))


def test_display_texts_are_cuda_gdbs():
    assert exceptions.describe(14).display == "Warp Illegal Address"
    assert exceptions.describe(5).display == "Warp Out-of-range Address"
    assert exceptions.describe(12).display == "Warp Assert"
    assert exceptions.describe(exceptions.UNKNOWN).display == "Device Unknown Exception"


def test_every_code_to_36_is_known_and_named():
    for code in range(1, 37):
        kind = exceptions.describe(code)
        assert kind.known and kind.name.startswith("CUDBG_EXCEPTION_") and kind.display


def test_renamed_codes_keep_their_aliases():
    assert "CUDBG_EXCEPTION_RESERVED_0" in exceptions.describe(1).aliases


def test_unknown_code_is_raw():
    kind = exceptions.describe(4242)
    assert not kind.known and "4242" in kind.name and "4242" in kind.display
