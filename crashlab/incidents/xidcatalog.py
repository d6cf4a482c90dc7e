"""What an Xid number means for the GPU that printed it: software, hardware or unknown, and what
NVIDIA recommends doing.

Source: NVIDIA's Xid catalog for Ampere and newer GPUs ("Analyzing Xid Errors with the Xid
Catalog", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): its mnemonic, its
description, and its two resolution buckets (the immediate action and the investigatory one),
copied as NVIDIA spells them (RESTART_APP, RESET_GPU, RESTART_BM, IGNORE, WORKFLOW_XID_13, ...).

NVIDIA does not class each Xid as software or hardware; the class here is read from the
catalog's own trigger text, and ``basis`` says which words it rests on. Where the text names
neither (a timeout, a teardown that follows another Xid), the class is ``unknown``: advice never
drains a GPU on a guess. An Xid the catalog does not list here is ``unknown`` with no action.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..vocabulary import XidOrigin

#: NVIDIA's immediate actions that take the GPU out of service until it is reset (or the node
#: rebooted): a server restarted onto it meets the same fault.
GPU_OUT_OF_SERVICE = frozenset({"RESET_GPU", "RESTART_BM"})


@dataclass(frozen=True)
class XidKind:
    """One Xid number as NVIDIA's catalog describes it."""

    xid: int
    mnemonic: str  # NVIDIA's name ("ROBUST_CHANNEL_GR_EXCEPTION"); "" where not catalogued
    description: str  # the catalog's short description ("Graphics Engine Exception")
    origin: XidOrigin  # software (the application), hardware (the GPU, its memory, its bus), unknown
    immediate_action: str | None  # the catalog's resolution bucket, as NVIDIA spells it
    investigatory_action: str | None
    basis: str  # the catalog's words the origin rests on

    @property
    def takes_gpu_out_of_service(self) -> bool:
        """NVIDIA's immediate action resets the GPU or reboots the node."""
        return self.immediate_action in GPU_OUT_OF_SERVICE


_CATALOG = {kind.xid: kind for kind in (
    XidKind(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "unknown",
          "RESTART_APP", "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream",
          "software", "RESTART_APP", "CHECK_APP/CUDA", "investigate the application or CUDA"),
    XidKind(13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", "software",
          "RESTART_APP", "WORKFLOW_XID_13",
          "logged for general user application faults, typically out of bounds; rarely hardware"),
    XidKind(14, "ROBUST_CHANNEL_FAKE_ERROR", "Fake or injected error from userspace", "software",
          "IGNORE", "CONTACT_SUPPORT", "injected from userspace"),
    XidKind(25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream",
          "software", "RESTART_APP", "CHECK_APP/CUDA", "investigate the application or CUDA"),
    XidKind(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "software",
          "RESTART_APP", "WORKFLOW_XID_31",
          "typically application-level bugs, but can also be driver or hardware bugs"),
    XidKind(32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "hardware",
          "RESTART_APP", "CHECK_APP/CUDA",
          "primarily quality issues on PCI, generally not caused by the application"),
    XidKind(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "unknown",
          "IGNORE", "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "software",
          "IGNORE", "CONTACT_SUPPORT",
          "a user application hit a software induced fault; the GPU remains healthy"),
    XidKind(44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch",
          "unknown", "IGNORE", "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
          "unknown", "WORKFLOW_XID_45", "Solo: RESTART_FM / Not Solo: IGNORE (follow other Xid)",
          "the driver tore an application down (Control-C, a reset, a kill, or another Xid): "
          "the Xid beside it says why"),
    XidKind(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "unknown",
          "RESET_GPU", "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "hardware",
          "WORKFLOW_XID_48", "WORKFLOW_XID_48",
          "an uncorrectable ECC error; a GPU reset or node reboot is needed to clear it"),
    XidKind(62, "PMU_HALT_ERROR", "Internal micro-controller halt", "hardware", "RESET_GPU",
          "CONTACT_SUPPORT", "the GPU's internal micro-controller halted"),
    XidKind(63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "hardware",
          "IGNORE", "IGNORE", "the GPU handled an ECC memory error (row remapping)"),
    XidKind(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "hardware",
          "RESET_GPU", "CONTACT_SUPPORT", "row remapping of an ECC memory error failed"),
    XidKind(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "unknown", "RESTART_APP",
          "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "software",
          "RESTART_APP", "CHECK_APP/CUDA", "investigate the application or CUDA"),
    XidKind(74, "NVLINK_ERROR", "NVLINK Error", "hardware", "WORKFLOW_NVLINK_ERR",
          "CONTACT_SUPPORT",
          "a problem with the NVLink connection or the device at its remote end"),
    XidKind(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
          "hardware", "RESTART_BM", "CONTACT_SUPPORT",
          "the GPU is not accessible over PCI Express, often a hardware failure of the link"),
    XidKind(92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "hardware",
          "IGNORE", "CONTACT_SUPPORT", "single-bit ECC errors in the GPU's memory"),
    XidKind(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "hardware",
          "RESTART_APP", "IGNORE (sympathetic)",
          "a memory error contained to one application; reset the GPU when convenient"),
    XidKind(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "hardware",
          "RESET_GPU", "IGNORE (sympathetic)",
          "a memory error that affects several applications; the GPU must be reset"),
    XidKind(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "unknown",
          "RESET_GPU", "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(110, "SEC_FAULT_ERROR", "Security Fault Error", "hardware", "RESET_GPU",
          "INVESTIGATE_SW", "uncommon unless there is a hardware failure"),
    XidKind(119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "hardware", "RESET_GPU", "INVESTIGATE_SW",
          "the GPU's GSP core did not answer; a GPU reset or node power cycle may be needed"),
    XidKind(120, "GSP_ERROR", "GSP Error", "hardware", "RESET_GPU", "INVESTIGATE_SW",
          "an error in code running on the GPU's GSP core; a GPU reset or power cycle may be "
          "needed"),
    XidKind(137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "software", "IGNORE",
          "XID_137_FLOW", "typically application-level bugs (an illegal peer-to-peer access)"),
    XidKind(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "hardware",
          "RESET_GPU", "CONTACT_SUPPORT", "uncorrectable errors in GPU memory"),
    XidKind(143, "GPU_INIT_ERROR", "GPU Initialization Error", "unknown", "RESET_GPU",
          "CONTACT_SUPPORT", "the catalog names no cause"),
    XidKind(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "unknown",
          "XID_154", "N/A Informational only regarding another Xid",
          "summarises the recovery action another Xid requires: its text names the action"),
    XidKind(158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "unknown", "RESET_GPU",
          "CONTACT_SUPPORT", "the catalog names no cause"),
)}


def xid_kind(xid: int) -> XidKind:
    """NVIDIA's catalog entry for an Xid number; ``unknown`` with no action where not listed."""
    if (kind := _CATALOG.get(xid)) is not None:
        return kind
    return XidKind(xid, "", "", "unknown", None, None, "not in crashlab's copy of NVIDIA's catalog")
