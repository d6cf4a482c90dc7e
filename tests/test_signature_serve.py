"""Signatures of real ``crashlab serve`` runs of the stand-in SGLang server (tests/serve_harness.py):
report.json carries them (each incident's and the run's), report.md and serve's summary show them,
and the same crash in another run, on another rank, loaded at another address, or after a
restart, is the same signature.
"""

from __future__ import annotations

import crashlab
from crashlab.report.run import RunReport
from crashlab.signature import compute, compute_all
from tests import coredump_builder, scenarios
from tests.schema_check import errors
from tests.serve_harness import FAST, FAULT_DUMP, Serve, environment, free_port, sglang
from tests.test_serve import finished


def run(tmp_path, *options, **standin) -> tuple[Serve, RunReport]:
    serve = Serve(tmp_path, sglang(free_port(), *options), *FAST,
                  *standin.pop("serve_options", ()), env=environment(crash_on="start", **standin))
    finished(serve, 0)
    data = serve.report()
    assert errors(data, "run") == []
    return serve, RunReport.model_validate(data)


def test_a_gpu_fault_run_is_signed_by_its_fault_dump_and_shows_it(tmp_path):
    serve, report = run(tmp_path, "--tp-size", "2", crash="gpu-fault")
    [incident] = report.incidents
    fault, collateral = incident.dumps
    assert report.signature == incident.signature == fault.report.signature == compute(report)
    assert report.signature == crashlab.inspect(FAULT_DUMP).signature
    assert report.signature.kind == "gpu-fault"
    signed = compute_all(report)
    assert [(s.dump, s.label, s.signature.kind) for s in signed] == [
        (None, None, "gpu-fault"), (fault.path, "FAULT", "gpu-fault"),
        (collateral.path, "COLLATERAL", "collateral")]
    assert signed[2].signature.parts == ["fake_allreduce_wait"]
    line = f"signature {report.signature.hash} {report.signature.title}"
    assert f"crashlab:   {line}" in serve.stderr.splitlines()
    markdown = (serve.run_dir / "report.md").read_text()
    assert f"| Signature | `{report.signature.hash}` {report.signature.title} |" in markdown


def test_the_same_fault_on_another_rank_loaded_elsewhere_is_the_same_run_signature(tmp_path):
    variant = scenarios.fault("moe_align.sm_90.cubin:shared-out-of-range", scenarios.WARP_OUT_OF_RANGE_ADDRESS,
                              device_count=2, faulting_device=1, code_base=0x7FA1_2000_0000)
    dump = tmp_path / "variant.nvcudmp"
    coredump_builder.write(variant.spec, dump)
    _, report = run(tmp_path, "--tp-size", "2", crash="gpu-fault", dump=str(dump))
    fault = report.incidents[0].dumps[0]
    assert fault.label == "FAULT" and fault.report.faults[0].device == 1
    assert fault.report.faults[0].pc != crashlab.inspect(FAULT_DUMP).faults[0].pc
    assert report.signature == crashlab.inspect(FAULT_DUMP).signature


def test_a_cuda_error_raised_in_the_scheduler_is_signed_from_the_log(tmp_path):
    _, report = run(tmp_path, crash="scheduler-exception")
    signature = report.signature
    assert signature.kind == "cuda-error"
    assert signature.parts[:2] == ["CUDA error: an illegal memory access was encountered", "RuntimeError"]
    assert len(signature.parts) > 2  # the innermost functions of the stand-in's scheduler


def test_every_restart_of_the_same_crash_has_the_same_signature(tmp_path):
    _, report = run(tmp_path, crash="abort",
                    serve_options=("--restart", "on-crash", "--max-restarts", "1", "--restart-delay", "0.1"))
    first, second = report.incidents
    assert first.signature == second.signature == report.signature
    assert (first.signature.kind, first.signature.parts) == ("signal", ["SIGABRT", "server"])
