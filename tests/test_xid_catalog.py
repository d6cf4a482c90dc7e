"""The Xid catalogue: NVIDIA's resolution buckets, and a class that never guesses hardware."""

from __future__ import annotations

from crashlab.incidents.xidcatalog import xid_kind


def test_an_application_fault_is_software_and_restarts_the_app():
    for xid in (13, 31, 43):
        kind = xid_kind(xid)
        assert kind.origin == "software"
        assert not kind.takes_gpu_out_of_service
    assert xid_kind(13).immediate_action == "RESTART_APP"
    assert xid_kind(31).investigatory_action == "WORKFLOW_XID_31"


def test_ecc_bus_and_gsp_are_hardware_and_most_take_the_gpu_out_of_service():
    for xid in (48, 63, 64, 79, 94, 95, 119, 120):
        assert xid_kind(xid).origin == "hardware", xid
    for xid in (64, 79, 95, 119, 120, 62):
        assert xid_kind(xid).takes_gpu_out_of_service, xid
    # a row remapping event is recorded, not acted on; a contained error restarts the app
    assert xid_kind(63).immediate_action == "IGNORE"
    assert not xid_kind(94).takes_gpu_out_of_service
    assert xid_kind(79).immediate_action == "RESTART_BM"


def test_an_xid_the_catalogue_does_not_list_is_unknown_with_no_action():
    kind = xid_kind(9999)
    assert (kind.origin, kind.immediate_action, kind.mnemonic) == ("unknown", None, "")
    assert xid_kind(154).origin == "unknown"
    assert xid_kind(45).origin == "unknown"
