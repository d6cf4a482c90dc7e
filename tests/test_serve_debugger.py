"""serve's triage with NVIDIA's real cuda-gdb: each dump's report carries the debugger's view of
it and the agreement with the native one, in report.json and report.md alike."""

from __future__ import annotations

from tests.serve_harness import FAST, Serve, environment, free_port, sglang


def test_a_gpu_fault_is_triaged_with_the_real_debugger_beside_the_native_view(tmp_path, real_cuda_gdb):
    env = environment(crash="gpu-fault", crash_on="start")
    env["CRASHLAB_CUDA_GDB"] = real_cuda_gdb
    serve = Serve(tmp_path, sglang(free_port(), "--tp-size", "2"), *FAST, env=env)
    assert serve.finish() == 0, serve.stderr
    incident = serve.report()["incidents"][0]
    fault, collateral = incident["dumps"]
    section = fault["report"]["debugger"]
    assert section["status"] == "ok", section
    verdicts = {a["field"]: a["verdict"] for a in section["faults"][0]["agreement"]}
    assert "disagree" not in verdicts.values(), verdicts
    assert all(verdicts[f] == "agree" for f in ("kernel", "exception", "block", "thread", "pc")), verdicts
    assert collateral["report"]["debugger"]["status"] in ("ok", "partial")
    assert not any(note.startswith("debugger view") for note in incident["notes"])
    markdown = (serve.run_dir / "report.md").read_text()
    assert f"debugger {section['version']}: ok" in markdown
