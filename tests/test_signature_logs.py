"""Signatures of crashes that left no GPU dump, from real logs: the stderr of a real SGLang 0.5.23
server crashed three ways and a real rank-prefixed torch traceback (fixtures/logs, with
provenance), and NCCL watchdog lines quoted from a real SGLang report (sgl-project/sglang#1693).
Each log is scanned by serve's own scanner; pairs are the log as another install, release, rank
or run would print it (other paths, line numbers, pids, times), which must match, and other
crashes, which must not.
"""

from __future__ import annotations

import re

from crashlab.report.run import ExitStatus, Finding, Incident, ProcessRecord
from crashlab.signature import compute
from tests.test_run_report_md import EXCEPTION_LOG, SEGV_LOG, SIGKILL_LOG, TORCH_SAMPLE, scan

#: sgl-project/sglang#1693, two ranks of one timeout as torch printed them.
NCCL_TIMEOUT = (
    "[rank1]:[E1016 03:31:38.928019586 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
    "Timeout(ms)=600000) ran for 600071 milliseconds before timing out.\n"
    "[rank4]:[E1016 03:31:38.928463388 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
    "Timeout(ms)=600000) ran for 600071 milliseconds before timing out.\n")


def incident(findings: list[Finding], processes=(), exit=None) -> Incident:
    return Incident(incarnation=1, directory="incarnation-1", kind="crash", started_at="t", ended_at="t",
                    exit=exit, stopped_by_crashlab=False, summary="", dumps=[], findings=findings,
                    processes=list(processes))


def signed(data: bytes, **fields):
    return compute(incident(scan(data), **fields))


def elsewhere(data: bytes) -> bytes:
    """The same crash as another install of another release prints it: other paths, line
    numbers, times and pids."""
    text = data.decode()
    text = text.replace("/opt/sglang-0.5.23/lib/python3.11/site-packages", "/usr/local/lib/python3.12/dist-packages")
    text = re.sub(r'line (\d+), in', lambda m: f"line {int(m[1]) + 17}, in", text)
    text = re.sub(r"\d\d:\d\d:\d\d\]", "04:05:06]", text)
    return re.sub(r"pid=\d+", "pid=4242", text).encode()


def test_a_scheduler_exception_is_the_process_the_type_and_the_innermost_functions():
    signature = signed(EXCEPTION_LOG.read_bytes())
    assert signature.kind == "python-exception"
    assert signature.parts == ["scheduler", "IndexError", "__call__", "apply_custom_logit_processor",
                               "_preprocess_logits"]
    assert signature.title == "IndexError in __call__ (scheduler)"
    assert signature.search == '"IndexError" "apply_custom_logit_processor"'
    assert "5000" not in signature.text and "sampler.py" not in signature.text  # no message, no path


def test_the_same_exception_in_another_install_and_release_is_the_same_signature():
    data = EXCEPTION_LOG.read_bytes()
    moved = elsewhere(data)
    assert moved != data and b"line 1082, in apply_custom_logit_processor" in moved
    assert signed(moved) == signed(data)


def test_a_release_that_renames_a_caller_is_another_signature_with_the_same_coarse_key():
    data = EXCEPTION_LOG.read_bytes()
    renamed = data.replace(b"in _preprocess_logits", b"in _prepare_logits")
    assert renamed != data
    before, after = signed(data), signed(renamed)
    assert before.hash != after.hash and before.coarse == after.coarse
    other_type = signed(data.replace(b"IndexError", b"KeyError"))
    assert other_type.coarse != before.coarse


def test_a_native_segfault_is_the_signal_the_process_and_its_innermost_named_frames():
    signature = signed(SEGV_LOG.read_bytes())
    assert signature.kind == "signal"
    assert signature.parts == ["SIGSEGV", "detokenizer", "__GI___poll", "zmq_msg_recv",
                               "_PyObject_VectorcallTstate"]
    assert any("innermost frame first" in note for note in signature.notes)
    assert signed(elsewhere(SEGV_LOG.read_bytes())) == signature


def test_a_killed_scheduler_is_the_signal_and_the_role_without_its_rank():
    signature = signed(SIGKILL_LOG.read_bytes())
    assert signature.parts == ["SIGKILL", "scheduler"]  # "Subprocess scheduler_0 ... exit code -9"
    assert signature.title == "SIGKILL in scheduler"
    assert signature != signed(SEGV_LOG.read_bytes())


def test_the_processes_serve_watched_name_a_death_the_log_does_not():
    killed = ProcessRecord(pid=11, ppid=10, role="scheduler", ranks="TP3", cmdline="sglang::scheduler_TP3",
                           started_at="t", exit=ExitStatus(signal=6, signal_name="SIGABRT"))
    signature = compute(incident([], processes=[killed]))
    assert signature.parts == ["SIGABRT", "scheduler"]
    rank0 = killed.model_copy(update={"ranks": "TP0", "pid": 12})
    assert compute(incident([], processes=[rank0])) == signature


def test_a_torch_traceback_without_exception_line_skips_dispatch_frames_and_ranks():
    data = TORCH_SAMPLE.read_bytes()
    signature = signed(data)
    assert signature.kind == "python-exception"
    assert signature.parts == ["no exception line", "apply", "forward", "forward"]
    assert any(note.startswith("python-dispatch-frames") for note in signature.notes)
    assert b"_wrapped_call_impl" in data and "_call_impl" not in signature.text
    assert signed(data.replace(b"[rank0]:", b"[rank5]:")) == signature


def test_an_nccl_timeout_is_the_message_and_the_collective_on_every_rank():
    signature = signed(NCCL_TIMEOUT.encode())
    assert signature.kind == "nccl-timeout"
    assert signature.parts == ["Watchdog caught collective operation timeout", "OpType=_ALLGATHER_BASE"]
    rank4 = NCCL_TIMEOUT.splitlines()[1]
    assert signed(rank4.encode() + b"\n") == signature
    allreduce = rank4.replace("_ALLGATHER_BASE", "ALLREDUCE").replace("9141", "12")
    assert signed(allreduce.encode() + b"\n") != signature


def test_a_cuda_error_outranks_the_exception_that_carries_it():
    """The real scheduler's traceback, as it reads when the exception is a CUDA error."""
    text = EXCEPTION_LOG.read_text().replace(
        "IndexError: index 5000 is out of bounds for dimension 0 with size 1000",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered")
    signature = signed(text.encode())
    assert signature.kind == "cuda-error"
    assert signature.parts == ["CUDA error: an illegal memory access was encountered",
                               "torch.AcceleratorError", "__call__", "apply_custom_logit_processor",
                               "_preprocess_logits"]
    assert signature.search == '"CUDA error: an illegal memory access was encountered"'


def test_without_any_finding_the_server_exit_is_the_signature():
    signature = compute(incident([], exit=ExitStatus(code=3)))
    assert (signature.kind, signature.parts) == ("exit", ["server", "exited with code 3"])
    assert compute(incident([], exit=ExitStatus(code=1))).hash != signature.hash


def test_a_finding_whose_words_were_masked_is_signed_by_its_message():
    masked = Finding(kind="cuda-error", text="[2026-11-23 20:08:06 TP0] RuntimeError: an illegal memory ****",
                     stream="stderr", line=7, time="t")
    signature = compute(incident([masked]))
    assert signature.kind == "cuda-error" and signature.parts == ["RuntimeError: an illegal memory ****"]


def test_a_signature_that_cannot_be_computed_is_said_not_raised():
    from crashlab.signature.signing import compute_or_why

    signature, why = compute_or_why(incident(scan(SIGKILL_LOG.read_bytes())))
    assert signature.parts == ["SIGKILL", "scheduler"] and why is None
    signature, why = compute_or_why(SIGKILL_LOG)  # not a report
    assert signature is None and why.startswith("no signature: crashlab could not compute it (TypeError")
