"""The GPUs an Xid line names, placed on the ranks that used them, with a real serve run: the
stand-in SGLang (tests/standin) launched with --tp-size 2 on CUDA_VISIBLE_DEVICES=2,3 of the
stand-in nvidia-smi's 8 x H100 node (tests/standin_tools), the driver's lines through the FIFO
that stands in for /dev/kmsg (tests/test_incidents_serve.py says why), and crashlab report on the
run directory with the same lines as a node's log (the Xid 31 payload is a real H200's:
fixtures/logs/xid/PROVENANCE.md). Where the run cannot place a GPU, the reason is said."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crashlab.incidents.kernellogfile import read_kernel_text
from crashlab.incidents.xidgpus import RunGpu, RunPlaces, SGLangPlacement, place
from crashlab.incidents.xidtriage import triage
from tests.conftest import run_cli
from tests.env_machine import STANDIN_TOOLS
from tests.serve_harness import FAST, Serve, environment, free_port, post_generate, sglang
from tests.test_incidents_serve import folder

MMU = ("channel 0x00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC0 GPCCLIENT_T1_8 "
       "faulted @ 0x7fcd_ce700000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE")
#: The stand-in nvidia-smi's GPUs 2 and 3 (its bus ids 3A and 5D, as the driver prints them).
GPU2, GPU3 = "PCI:0000:3a:00", "PCI:0000:5d:00"


def _line(device: str, pid: int | None = None) -> str:
    named = f"pid={pid}, name=python3, " if pid is not None else ""
    return f"NVRM: Xid ({device}): 31, {named}{MMU}"


def _serve_tp2(tmp_path: Path, *options: str, fallen_off: bool = False) -> tuple[Serve, list[str]]:
    """serve on the stand-in SGLang (TP 2, GPUs 2 and 3); an Xid 31 on each GPU (the first
    naming rank 0's pid, as the driver does where it knows the process), or (FALLEN_OFF) GPU 3
    fallen off the bus, then a crash that leaves no GPU dump. Returns serve and the Xid lines."""
    kmsg = tmp_path / "kmsg"
    os.mkfifo(kmsg)
    env = environment(crash="abort")
    env.update(PATH=os.pathsep.join([str(STANDIN_TOOLS), env["PATH"]]), CUDA_VISIBLE_DEVICES="2,3")
    port = free_port()
    serve = Serve(folder(tmp_path / "serve"), sglang(port, "--tp-size", "2"), *FAST,
                  "--kernel-log", str(kmsg), *options, env=env, entry=("tests.serve_entry",))
    manifest = serve.wait_healthy()
    [rank0] = [p["pid"] for p in manifest["incarnations"][0]["processes"] if p.get("ranks") == "TP0"]
    lines = ([f"NVRM: Xid ({GPU3}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
              "bus."] if fallen_off else [_line(GPU2, rank0), _line(GPU3)])
    with open(kmsg, "wb", buffering=0) as kernel:
        for number, line in enumerate(lines):
            kernel.write(f"4,{3056 + number},97461240,-;{line}\n".encode())
        serve.wait_manifest(lambda m: sum(f["kind"] == "xid" for f in m["incarnations"][-1]
                                          ["findings"]) == len(lines), "the Xid findings")
        post_generate(port)
        assert serve.finish() == 0, serve.stderr
    return serve, lines


def test_serve_and_report_name_the_ranks_of_the_gpus_an_xid_names(tmp_path):
    serve, lines = _serve_tp2(tmp_path)
    [incident] = serve.report()["incidents"]
    assert incident["dumps"] == []
    gpus = incident["kernel_log"]["gpus"]
    assert [(g["device"], g["bus_id"], g["index"], g["cuda_index"], g["ranks"], g["unmapped"])
            for g in gpus] == [(GPU2, "0000:3a:00.0", 2, 0, ["TP0"], None),
                               (GPU3, "0000:5d:00.0", 3, 1, ["TP1"], None)]
    assert "GPU-00000002" not in json.dumps(gpus)  # the run knows its UUID; reports withhold it
    # the same lines copied off the node, given to report with the run: the no-dump triage
    log = tmp_path / "node.log"
    log.write_text("".join(f"Nov 23 10:15:0{n} node7 kernel: {line}\n" for n, line in enumerate(lines)))
    done = run_cli("report", serve.run_dir, "--kernel-log", log, "--out", tmp_path / "issue", "--json")
    assert done.returncode == 0, done.stderr.decode()
    summary = json.loads(done.stdout)["xid_triage"]["summary"]
    assert summary == ("MMU fault on ranks TP0 and TP1 at the same VA 0x7fcdce700000 (write, PDE "
                       "missing): software; kernel unknown: no GPU dump (serve --coredump would "
                       "have kept one)")


def test_the_drain_names_the_gpu_as_the_operator_acts_on_it_and_serve_stops_there(tmp_path):
    serve, _ = _serve_tp2(tmp_path, "--restart", "on-crash", fallen_off=True)
    gpu3 = "PCI 0000:5d:00.0 (nvidia-smi index 3, CUDA_VISIBLE_DEVICES index 1)"
    [incident] = serve.report()["incidents"]
    assert (incident["advice"]["action"], incident["advice"]["gpu"]) == ("drain", gpu3)
    refused = [line for line in serve.out.read_text().splitlines() if line.startswith("not restarting")]
    assert refused == [f"not restarting onto {gpu3}, which the advice drains: {incident['advice']['reason']} "
                       "(--restart always would restart)"]
    markdown = (serve.run_dir / "report.md").read_text().replace("<!-- -->", "")  # no autolinks
    assert f"- {GPU3} is {gpu3}; rank TP1" in markdown
    assert "GPU-00000003" not in markdown


def test_a_log_alone_names_its_gpus_and_says_why_no_rank(tmp_path):
    log = read_kernel_text("\n".join([_line(GPU2, 4242), _line(GPU3, 4243)]), "node.log")
    summary = triage(log).summary
    assert summary.startswith(f"MMU fault on 2 GPUs ({GPU2}, {GPU3}) at the same VA 0x7fcdce700000")
    assert summary.endswith("; rank unknown: no run directory was given, and a log alone names no rank")


def _run(**parts) -> RunPlaces:
    gpus = (RunGpu("0000:3a:00.0", 2, "GPU-00000002-ffdd-8720-1df0-98bd8cdc05b1"),
            RunGpu("0000:5d:00.0", 3, "GPU-00000003-ffdd-8720-1df0-98bd8cdc05b1"))
    return RunPlaces(where="the run directory r", gpus=gpus, **parts)


def test_each_reason_a_gpu_cannot_be_placed_is_said():
    log = read_kernel_text("\n".join([_line(GPU2), _line("PCI:0000:db:00")]), "node.log")
    hidden, elsewhere = place(log, _run(visible="3", sglang=SGLangPlacement(1)))
    assert hidden.cuda_index is None and hidden.ranks == []
    assert hidden.unmapped == "the server could not see this GPU (CUDA_VISIBLE_DEVICES=3)"
    assert elsewhere.bus_id is None and "lists no GPU at 0000:db:00" in (elsewhere.unmapped or "")
    [plain] = place(read_kernel_text(_line(GPU2), "node.log"), _run())
    assert plain.cuda_index == 2 and "not a single-node SGLang launch" in (plain.unmapped or "")


def test_uuids_in_cuda_visible_devices_and_sglangs_base_and_step_place_a_rank():
    log = read_kernel_text(_line(GPU3), "node.log")
    [gpu] = place(log, _run(visible="GPU-00000003,GPU-00000002",
                            sglang=SGLangPlacement(tp_size=2, base_gpu_id=0, gpu_id_step=1)))
    assert (gpu.cuda_index, gpu.ranks) == (0, ["TP0"])
    [gpu] = place(log, _run(sglang=SGLangPlacement(tp_size=2, base_gpu_id=1, gpu_id_step=2)))
    assert (gpu.cuda_index, gpu.ranks) == (3, ["TP1"])
