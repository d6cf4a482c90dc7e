"""crashlab serve end to end: real processes, real signals, real HTTP on 127.0.0.1.

The server is the stand-in in tests/standin (it says so); crashlab is the real command. Each
test ends by checking, with psutil, that no process of the run outlived it.
"""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.env import hostcore
from crashlab.env.checks import capture
from crashlab.textsize import with_bytes
from tests.conftest import run_cli
from tests.doctor_machine import Tree
from tests.schema_check import errors
from tests.serve_harness import (
    FAST,
    FAULT_DUMP,
    GENERATE_PROMPT,
    HANG_DUMP,
    Serve,
    environment,
    free_port,
    post_generate,
    process,
    sglang,
    survivors,
    wait_for,
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cores(serve: Serve, incarnation: int = 1) -> list[Path]:
    return sorted((serve.run_dir / f"incarnation-{incarnation}" / "cores").glob("core.*"))


def finished(serve: Serve, expected: int) -> dict:
    code = serve.finish()
    assert code == expected, serve.stderr
    manifest = serve.manifest()
    assert manifest["status"] == "done"
    assert survivors(manifest) == []
    return manifest


def test_a_clean_exit_is_exit_1_with_logs_manifest_and_coredump_environment(tmp_path):
    script = "import os, sys; print('hello from the server'); print(os.environ['CUDA_COREDUMP_FILE'], file=sys.stderr)"
    serve = Serve(tmp_path, [sys.executable, "-c", script], env=environment())
    manifest = finished(serve, 1)
    assert manifest["outcome"]["result"] == "clean-exit"
    assert not (serve.run_dir / "report.json").exists()
    assert "hello from the server" in serve.stdout  # teed to the terminal
    incarnation = serve.incarnation
    assert (incarnation / "stdout.log").read_text() == "hello from the server\n"
    cores_dir = incarnation / "cores" / "incoming"
    assert (incarnation / "stderr.log").read_text().strip() == f"{cores_dir}/core.%h.%p.%t.nvcudmp"
    env = manifest["environment"]
    assert env["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] == {"value": "1", "set_by": "crashlab",
                                                        "crashlab_value": None}
    assert env["CUDA_COREDUMP_SHOW_PROGRESS"]["value"] == "1"
    assert env["CUDA_COREDUMP_GENERATION_FLAGS"]["value"] == (
        "skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,"
        "skip_constbank_memory")
    assert "CUDA_ENABLE_USER_TRIGGERED_COREDUMP" not in env  # only with --user-dumps
    logs = {f["path"]: f for f in manifest["files"] if f["kind"] == "log"}
    stdout_log = logs["incarnation-1/stdout.log"]
    assert stdout_log["size_bytes"] == 22 and stdout_log["sha256"] == sha256(incarnation / "stdout.log")
    root = manifest["incarnations"][0]["processes"][0]
    assert root["role"] == "server" and root["exit"]["code"] == 0


API_KEY = "sk-live-DoNotLeak0123456789abcdef"
HF_TOKEN = "hf_DoNotLeakEither0123456789abcdef"


def test_a_sigsegv_after_a_request_is_triaged_and_every_channel_is_masked(tmp_path):
    """Echo on: the terminal gets the server's output as it comes, its launch line
    (``server_args=ServerArgs(... api_key=...)``) masked like every file of the run."""
    port = free_port()
    env = environment(crash="segv")
    env["HF_TOKEN"] = HF_TOKEN
    serve = Serve(tmp_path, sglang(port, "--api-key", API_KEY), *FAST, env=env)
    serve.wait_healthy()
    wait_for(lambda: (serve.incarnation / "server_info.json").exists(), "server_info.json")
    post_generate(port)
    manifest = finished(serve, 0)
    root = process(manifest, "server")
    assert root["exit"]["signal_name"] == "SIGSEGV" and root["exit"]["observed"] == "waited"
    info = json.loads((serve.incarnation / "server_info.json").read_text())
    assert info["api_key"] == "***" and info["max_total_num_tokens"] == 4096
    assert info["tokenizer_path"] == "stand-in/model"
    launch = json.loads((serve.incarnation / "launch.json").read_text())
    assert launch["argv"][-4:] == ["--api-key", "***", "--crash-dump-folder",
                                   str(serve.incarnation / "requests")]
    assert launch["environment"]["HF_TOKEN"] == "***"
    assert API_KEY in (serve.incarnation / "stderr.log").read_text()  # planted; the evidence, as is
    written = {path.name for path in serve.run_dir.rglob("*") if path.is_file()}
    assert {"manifest.json", "report.json", "report.md", "server_info.json", "launch.json"} <= written
    # the logs and a host core are the evidence as it is (a core is the process's memory)
    evidence = {f["path"] for f in manifest["files"] if f["kind"] == "host-core"}
    for path in serve.run_dir.rglob("*"):
        if path.is_file() and path.name not in ("stdout.log", "stderr.log") \
                and str(path.relative_to(serve.run_dir)) not in evidence:
            assert API_KEY.encode() not in path.read_bytes(), path
            assert HF_TOKEN.encode() not in path.read_bytes(), path
    assert "server_args=ServerArgs(" in serve.stderr and "api_key='***'" in serve.stderr  # echoed
    for output in (serve.stdout, serve.stderr):
        assert API_KEY not in output and HF_TOKEN not in output
    report = serve.report()
    assert report["status"] == "crash" and report["source"]["kind"] == "run"
    assert report["incidents"][0]["exit"]["signal_name"] == "SIGSEGV"
    assert "killed by SIGSEGV" in serve.stderr


@pytest.mark.parametrize("crash,expect", [("abort", "SIGABRT"), ("exit", 3)])
def test_an_abort_or_a_non_zero_exit_is_a_crash(tmp_path, crash, expect):
    serve = Serve(tmp_path, sglang(free_port()), *FAST, env=environment(crash=crash, crash_on="start"))
    manifest = finished(serve, 0)
    exit_ = process(manifest, "server")["exit"]
    assert (exit_["signal_name"] if isinstance(expect, str) else exit_["code"]) == expect
    incident = serve.report()["incidents"][0]
    assert incident["kind"] == "crash"
    if crash == "exit":
        traceback = next(f for f in incident["findings"] if f["kind"] == "traceback")
        assert traceback["text"] == "RuntimeError: stand-in: model weights are garbage"
        assert traceback["frames"][-1]["function"] == "crash_now"
        assert traceback["frames"][-1]["file"].endswith("sglang/launch_server.py")


def test_a_child_dying_first_takes_the_sglang_crash_path_and_its_request_dump_is_kept(tmp_path):
    port = free_port()
    serve = Serve(tmp_path, sglang(port), *FAST, env=environment(crash="child-segv"))
    serve.wait_healthy()
    post_generate(port)
    manifest = finished(serve, 0)
    scheduler = process(manifest, "scheduler", "TP0")
    assert scheduler["exit"]["signal_name"] == "SIGSEGV"
    assert scheduler["exit"]["observed"] in ("zombie", "log")
    assert process(manifest, "server")["exit"]["signal_name"] == "SIGKILL"  # kill_process_tree
    assert process(manifest, "detokenizer")["exit"] is not None
    dumps = [f for f in manifest["files"] if f["kind"] == "request-dump"]
    assert len(dumps) == 1
    pickle = serve.run_dir / dumps[0]["path"]
    assert pickle.parent.parent == serve.incarnation / "requests"
    assert dumps[0]["sha256"] == sha256(pickle)
    replay = f"crashlab replay {pickle}"
    assert serve.report()["incidents"][0]["replay_commands"] == [replay]
    assert replay in serve.stderr and replay in (serve.run_dir / "report.md").read_text()
    listed = run_cli("replay", pickle, "--json")  # the command serve printed reads the dump
    assert listed.returncode == 0, listed.stderr
    requests = json.loads(listed.stdout)["requests"]
    assert len(requests) == 1 and requests[0]["text"].startswith(GENERATE_PROMPT)
    kinds = {f["kind"] for f in manifest["incarnations"][0]["findings"]}
    assert "sglang-crash" in kinds


def test_a_request_dump_holding_no_request_gets_no_replay_line(tmp_path):
    serve = Serve(tmp_path, sglang(free_port()), *FAST, env=environment(crash="child-segv",
                                                                         crash_on="start"))
    finished(serve, 0)
    [incident] = serve.report()["incidents"]
    [dump] = incident["request_dumps"]
    assert dump["requests"] == 0 and incident["replay_commands"] == []
    assert f"request dump {dump['path']} holds no request: nothing to replay" in incident["notes"]
    markdown = (serve.run_dir / "report.md").read_text()
    assert "crashlab replay" not in markdown and "bytes, 0 requests)" in markdown
    assert "replay" not in serve.stderr.split("incarnation 1: crash:", 1)[1]


def test_a_gpu_fault_on_one_rank_gives_a_fault_dump_and_a_collateral_dump(tmp_path):
    serve = Serve(tmp_path, sglang(free_port(), "--tp-size", "2"), *FAST,
                  env=environment(crash="gpu-fault", crash_on="start"))
    manifest = finished(serve, 0)
    report = serve.report()
    assert errors(report, "run") == []
    dumps = report["incidents"][0]["dumps"]
    assert [d["label"] for d in dumps] == ["FAULT", "COLLATERAL"]
    fault, collateral = dumps
    assert fault["report"]["faults"][0]["kernel"]["name"].startswith("moe_align_block_size")
    assert sha256(serve.run_dir / fault["path"]) == sha256(FAULT_DUMP)  # every byte kept
    assert sha256(serve.run_dir / collateral["path"]) == sha256(HANG_DUMP)
    assert collateral["reasons"][0] == "no exception in this dump"
    assert any(r.startswith("parked in a collective kernel (by name)") and "fake_allreduce_wait" in r
               for r in collateral["reasons"])
    assert any(r.startswith("written ") and r.endswith("after the first FAULT dump")
               for r in collateral["reasons"])
    assert not list((serve.incarnation / "cores" / "incoming").iterdir())
    assert process(manifest, "scheduler", "TP0")["exit"]["signal_name"] == "SIGABRT"
    markdown = (serve.run_dir / "report.md").read_text()
    assert len(markdown) <= 65_536 and "moe_align_block_size" in markdown
    assert "FAULT" in serve.stderr and "COLLATERAL" in serve.stderr
    assert f"({with_bytes(FAULT_DUMP.stat().st_size)})" in serve.stderr  # 131.8 kB (131,776 bytes)


def test_a_stop_while_the_driver_writes_a_dump_waits_for_it(tmp_path):
    # the dump's writing is held until crashlab has said it waits: a fixed 3 s of writing could
    # end before a loaded machine had delivered the SIGTERM
    hold = tmp_path / "hold-the-dump"
    hold.touch()
    serve = Serve(tmp_path, sglang(free_port()), *FAST,
                  env=environment(crash="gpu-fault", crash_on="start", dump_hold=str(hold)))
    serve.wait_log("coredump: Writing ELF file to")
    serve.signal(signal.SIGTERM)
    wait_for(lambda: "waiting for evidence before killing anything" in serve.stderr,
             "crashlab to wait for the dump")
    hold.unlink()
    manifest = finished(serve, 0)
    [dump] = cores(serve)
    assert dump.suffix == ".nvcudmp" and sha256(dump) == sha256(FAULT_DUMP)
    assert manifest["incarnations"][0]["stopped_by_crashlab"] is True
    assert serve.report()["incidents"][0]["dumps"][0]["label"] == "FAULT"


def test_a_rank_left_writing_by_its_dead_parent_is_waited_for_and_reaped(tmp_path):
    serve = Serve(tmp_path, sglang(free_port()), *FAST,
                  env=environment(crash="gpu-fault", crash_on="start", dump_seconds="2",
                                  exit_after_fault="1", child_outlives="1"))
    manifest = finished(serve, 0)
    assert process(manifest, "server")["exit"]["code"] == 1
    rank = process(manifest, "scheduler", "TP0")
    # orphaned, re-parented to crashlab (the subreaper), reaped by it: an exact status
    assert rank["exit"] == {"code": None, "signal": 6, "signal_name": "SIGABRT", "observed": "waited"}
    [dump] = cores(serve)
    assert sha256(dump) == sha256(FAULT_DUMP)


def test_dump_timeout_bounds_the_wait_and_keeps_the_partial_dump(tmp_path):
    serve = Serve(tmp_path, sglang(free_port()), "--health-interval", "0.2", "--dump-timeout", "1",
                  "--grace", "1", env=environment(crash="gpu-fault", crash_on="start",
                                                  dump_seconds="120"))
    serve.wait_log("coredump: Writing ELF file to")
    serve.signal(signal.SIGTERM)
    manifest = finished(serve, 0)
    [dump] = cores(serve)
    assert dump.name.endswith(".nvcudmp.partial") and 0 < dump.stat().st_size < FAULT_DUMP.stat().st_size
    record = next(f for f in manifest["files"] if f["kind"] == "coredump")
    assert record["complete"] is False
    assert any("--dump-timeout" in w for w in manifest["incarnations"][0]["warnings"])
    triaged = serve.report()["incidents"][0]["dumps"][0]
    assert triaged["label"] == "UNREADABLE" and triaged["error"]


def test_a_hang_is_captured_with_dump_now_and_sigterm_gets_the_request_dump(tmp_path):
    port = free_port()
    serve = Serve(tmp_path, sglang(port), "--user-dumps", *FAST, env=environment(crash="hang"))
    serve.wait_healthy()
    post_generate(port)
    serve.wait_manifest(lambda m: m["incarnations"][0]["health"]["state"] == "unhealthy",
                        "the health check to fail")
    done = run_cli("dump-now", serve.run_dir, "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert f"({with_bytes(HANG_DUMP.stat().st_size)})" in done.stderr.decode()
    serve.signal(signal.SIGTERM)
    manifest = finished(serve, 0)
    assert manifest["environment"]["CUDA_ENABLE_USER_TRIGGERED_COREDUMP"]["set_by"] == "crashlab"
    incident = serve.report()["incidents"][0]
    assert incident["kind"] == "dumps" and incident["stopped_by_crashlab"]
    [dump] = incident["dumps"]
    assert dump["label"] == "COLLATERAL" and dump["reasons"][0] == "no exception in this dump"
    assert sha256(serve.run_dir / dump["path"]) == sha256(HANG_DUMP)
    assert len(incident["request_dumps"]) == 1  # SGLang dumps requests on SIGTERM when unhealthy


def test_sigterm_escalates_to_sigkill_after_grace_and_leaves_no_orphan(tmp_path):
    pidfile = tmp_path / "orphan.pid"
    serve = Serve(tmp_path, sglang(free_port()), "--health-interval", "0.2", "--grace", "1",
                  env=environment(sigterm="ignore", orphan="1", orphan_pidfile=str(pidfile)))
    serve.wait_healthy()
    orphan = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), "the orphan's pid"))
    serve.wait_manifest(lambda m: orphan in {p["pid"] for p in m["incarnations"][0]["processes"]},
                        "crashlab to see the orphan")
    serve.signal(signal.SIGTERM)
    manifest = finished(serve, 1)
    assert manifest["outcome"]["result"] == "stopped"
    assert process(manifest, "server")["exit"]["signal_name"] == "SIGKILL"
    assert "SIGKILL" in serve.stderr
    orphan_record = next(p for p in manifest["incarnations"][0]["processes"] if p["pid"] == orphan)
    assert orphan_record["exit"]["signal_name"] == "SIGKILL"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_ctrl_c_or_a_closed_terminal_reaches_every_process_of_the_group(tmp_path, signum):
    # serve started from a terminal: SIGHUP at its default. A suite run under nohup passes SIGHUP
    # ignored to its children, and serve, like any nohup'd process, then rightly keeps running.
    serve = Serve(tmp_path, sglang(free_port(), "--tp-size", "2"), *FAST, env=environment(),
                  preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    serve.wait_healthy()
    serve.signal(signum)
    manifest = finished(serve, 1)
    processes = manifest["incarnations"][0]["processes"]
    assert {p["role"] for p in processes} >= {"server", "scheduler", "detokenizer"}
    assert all(p["exit"] is not None for p in processes)
    assert manifest["incarnations"][0]["stopped_by_crashlab"] is True
    assert f"received {signal.Signals(signum).name}" in serve.stderr


def test_restart_on_crash_gives_each_incarnation_its_folder(tmp_path):
    serve = Serve(tmp_path, sglang(free_port()), *FAST, "--restart", "on-crash", "--max-restarts",
                  "1", "--restart-delay", "0.1", env=environment(crash="abort", crash_on="start"))
    manifest = finished(serve, 0)
    assert [i["incident"] for i in manifest["incarnations"]] == ["crash", "crash"]
    assert [i["directory"] for i in manifest["incarnations"]] == ["incarnation-1", "incarnation-2"]
    for number in (1, 2):
        assert "crashing on cue" in (serve.run_dir / f"incarnation-{number}" / "stderr.log").read_text()
    assert len(serve.report()["incidents"]) == 2
    assert "restarting in 0.1 s (1 of 1)" in serve.stderr


def test_each_crash_is_recorded_and_printed_before_the_restart_and_only_once(tmp_path):
    marker, db = tmp_path / "crashed-once", tmp_path / "index.sqlite"
    script = (f"import os, pathlib, time\nm = pathlib.Path({str(marker)!r})\n"
              "if not m.exists():\n    m.touch()\n    os.abort()\ntime.sleep(600)\n")
    serve = Serve(tmp_path, [sys.executable, "-c", script], "--restart", "on-crash",
                  "--restart-delay", "0.1", "--db", str(db), env=environment())
    serve.wait_manifest(lambda m: len(m["incarnations"]) == 2
                        and m["incarnations"][1]["status"] == "running", "the second incarnation")
    listed = json.loads(run_cli("list", "--json", "--db", db).stdout)
    assert [c["source"] for c in listed["crashes"]] == [str(serve.run_dir)]
    assert "incarnation 1: crash:" in serve.stderr
    serve.signal(signal.SIGTERM)
    finished(serve, 0)
    assert serve.stderr.count("incarnation 1: crash:") == 1
    assert serve.stderr.count("report: ") == 1
    assert len(json.loads(run_cli("list", "--json", "--db", db).stdout)["crashes"]) == 1


def test_a_finished_run_directory_keeps_no_named_pipe_and_copies(tmp_path):
    script = ("import os, socket\nos.mkfifo(os.environ['CUDA_COREDUMP_PIPE'].replace('%h', "
              "socket.gethostname()).replace('%p', str(os.getpid())))\nraise SystemExit(3)\n")
    serve = Serve(tmp_path, [sys.executable, "-c", script], "--user-dumps", env=environment())
    finished(serve, 0)
    assert not any(path.is_fifo() for path in serve.run_dir.rglob("*"))
    shutil.copytree(serve.run_dir, tmp_path / "copied")
    assert (tmp_path / "copied" / "report.json").exists()


SEGFAULTER = "import os, signal\n\ndef inner():\n    os.kill(os.getpid(), signal.SIGSEGV)\n\ninner()\n"


def _segfaulter(tmp_path: Path, preexec_fn=None, **env: str) -> Serve:
    """A Python that SIGSEGVs under serve, both run in TMP_PATH (where a plain core_pattern
    puts the core); PYTHONFAULTHANDLER as ENV says (absent unless given)."""
    (tmp_path / "segfaulter.py").write_text(SEGFAULTER)
    environ = {k: v for k, v in environment().items() if k != "PYTHONFAULTHANDLER"} | env
    return Serve(tmp_path, [sys.executable, str(tmp_path / "segfaulter.py")], "--no-debugger",
                 env=environ, cwd=tmp_path, preexec_fn=preexec_fn)


def _plain_core_pattern() -> bool:
    where = hostcore.read_destination()
    return where is not None and where.program is None and where.problem() is None


@pytest.mark.skipif(not _plain_core_pattern() or hostcore.hard_limit() == "0"
                    or shutil.which("gdb") is None,
                    reason="needs a plain kernel.core_pattern, a hard core limit above 0 and GNU gdb")
def test_a_host_segfault_leaves_its_core_its_native_and_its_python_stack(tmp_path):
    serve = _segfaulter(tmp_path)
    manifest = finished(serve, 0)
    assert manifest["environment"]["PYTHONFAULTHANDLER"]["set_by"] == "crashlab"
    incident = serve.report()["incidents"][0]
    [native] = incident["native_stacks"]
    assert native["unavailable_reason"] is None and native["signal"].startswith("SIGSEGV")
    assert (serve.run_dir / native["core"]).is_file() and native["frames"]
    assert [f for f in manifest["files"] if f["kind"] == "host-core"][0]["path"] == native["core"]
    assert not list(tmp_path.glob("core*"))  # moved in, not left behind
    [python] = incident["python_stacks"]
    assert python["error"] == "Segmentation fault"
    assert [(f["function"], f["line"]) for f in python["frames"]] == [("inner", 4), ("<module>", 6)]
    markdown = (serve.run_dir / "report.md").read_text()
    assert "**Native stack**" in markdown and "**Python stack**" in markdown


def _no_core_at_all() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def test_the_users_faulthandler_value_is_kept_and_a_hard_limit_of_0_is_said(tmp_path):
    serve = _segfaulter(tmp_path, _no_core_at_all, PYTHONFAULTHANDLER="")
    manifest = finished(serve, 0)
    kept = manifest["environment"]["PYTHONFAULTHANDLER"]
    assert (kept["value"], kept["set_by"], kept["crashlab_value"]) == ("", "user", "1")
    problem = hostcore.limit_problem("0")
    assert serve.stderr.count(f"no host core: {problem}") == 1
    incident = serve.report()["incidents"][0]
    assert [s["unavailable_reason"] for s in incident["native_stacks"]] == [
        f"pid {manifest['incarnations'][0]['pid']}: {problem}"]
    assert incident["python_stacks"] == []  # faulthandler off, as the user said
    # doctor, for the same limits, says the same thing is missing
    tree = Tree(tmp_path / "machine")
    tree.proc_file("self/limits", "Limit                     Soft Limit           Hard Limit"
                   "           Units\nMax core file size        0                    0"
                   "                    bytes\n")
    assert problem in capture.core_ulimit(tree.machine()).message


def test_no_line_is_lost_in_a_flood_and_faults_keep_their_line_numbers(tmp_path):
    lines = 200_000
    script = (f"import sys\nw = sys.stdout.write\nfor i in range(1, {lines + 1}):\n"
              "    w('CUDA error: an illegal memory access was encountered\\n' if i % 50000 == 0 "
              "else 'line %07d of the flood, nothing to see here\\n' % i)\n")
    serve = Serve(tmp_path, [sys.executable, "-c", script], "--quiet", env=environment())
    manifest = finished(serve, 1)  # fault lines, but a clean exit: nothing crashed
    log = (serve.incarnation / "stdout.log").read_text().splitlines()
    assert len(log) == lines
    assert log[0] == "line 0000001 of the flood, nothing to see here" and log[-1].startswith("CUDA error")
    findings = manifest["incarnations"][0]["findings"]
    assert [f["line"] for f in findings] == [50_000, 100_000, 150_000, 200_000]
    assert findings[0]["before"][-1] == "line 0049999 of the flood, nothing to see here"
    assert findings[0]["after"][0] == "line 0050001 of the flood, nothing to see here"
    assert serve.stdout == ""  # --quiet


def test_the_users_values_win_and_secrets_never_reach_the_run_directory(tmp_path):
    env = environment()
    env.update(CUDA_COREDUMP_GENERATION_FLAGS="skip_abort", HF_TOKEN="hf_do_not_leak",
               MIRROR="https://bob:pw_do_not_leak@mirror.example/models")
    own_folder = tmp_path / "mine"
    serve = Serve(tmp_path, sglang(free_port(), "--crash-dump-folder", str(own_folder)), *FAST, env=env)
    serve.wait_healthy()
    refused = run_cli("dump-now", serve.run_dir)
    assert refused.returncode == 2 and b"--user-dumps" in refused.stderr
    serve.signal(signal.SIGTERM)
    manifest = finished(serve, 1)
    flags = manifest["environment"]["CUDA_COREDUMP_GENERATION_FLAGS"]
    assert flags["value"] == "skip_abort" and flags["set_by"] == "user"
    assert flags["crashlab_value"].startswith("skip_nonrelocated_elf_images")
    launch = json.loads((serve.incarnation / "launch.json").read_text())
    assert launch["environment"]["CUDA_COREDUMP_GENERATION_FLAGS"] == "skip_abort"
    assert launch["environment"]["HF_TOKEN"] == "***"
    assert launch["environment"]["MIRROR"] == "https://bob:***@mirror.example/models"
    assert launch["argv"].count("--crash-dump-folder") == 1  # the user's folder is kept
    for path in serve.run_dir.rglob("*"):
        if path.is_file():
            assert b"do_not_leak" not in path.read_bytes(), path


def test_a_request_dump_in_the_users_own_folder_is_adopted(tmp_path):
    port = free_port()
    own_folder = tmp_path / "mine"
    serve = Serve(tmp_path, sglang(port, "--crash-dump-folder", str(own_folder)), *FAST,
                  env=environment(crash="child-segv"))
    serve.wait_healthy()
    post_generate(port)
    manifest = finished(serve, 0)
    [record] = [f for f in manifest["files"] if f["kind"] == "request-dump"]
    [original] = own_folder.glob("*/crash_dump_*.pkl")
    assert record["origin"] == str(original)
    assert record["sha256"] == sha256(original) == sha256(serve.run_dir / record["path"])


@pytest.mark.parametrize("args,message", [
    ((), "needs a command"),
    (("--", "no-such-program-anywhere"), "command not found"),
    (("--health-url", "notaurl", "--", sys.executable, "-c", "pass"), "needs a scheme and a host"),
    (("--health-url", "http://", "--", sys.executable, "-c", "pass"), "needs a scheme and a host"),
])
def test_a_bad_command_line_is_one_line_and_exit_2(tmp_path, args, message):
    done = run_cli("serve", "--runs-dir", tmp_path / "runs", *args)
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: ") and message in lines[0], lines
    assert not (tmp_path / "runs").exists()  # no run directory for a command that cannot run


def test_a_runs_dir_that_is_a_file_is_bad_input(tmp_path):
    runs = tmp_path / "file"
    runs.write_text("")
    done = run_cli("serve", "--runs-dir", runs, "--", sys.executable, "-c", "pass")
    assert done.returncode == 2 and done.stderr.decode().count("\n") == 1


def test_dump_now_refuses_what_is_not_a_live_run(tmp_path):
    not_a_run = run_cli("dump-now", tmp_path)
    assert not_a_run.returncode == 2 and b"not a crashlab run directory" in not_a_run.stderr
    assert not_a_run.stderr.decode().count("\n") == 1
    serve = Serve(tmp_path, [sys.executable, "-c", "pass"], env=environment())
    finished(serve, 1)
    ended = run_cli("dump-now", serve.run_dir)
    assert ended.returncode == 3 and b"has ended" in ended.stderr


def test_the_python_api_supervises_and_triages(tmp_path):
    from crashlab.supervise import ServeOptions, serve

    said: list[str] = []
    outcome = serve(ServeOptions(command=[sys.executable, "-c", "import os; os.abort()"],
                                 runs_dir=tmp_path, echo=False), said.append)
    assert outcome.exit_code == 0 and outcome.result == "crash"
    assert outcome.report.incidents[0].exit.signal_name == "SIGABRT"
    assert outcome.run_dir.parent == tmp_path and (outcome.run_dir / "report.md").exists()
    assert any("killed by SIGABRT" in line for line in said)


def test_the_python_api_gives_the_signal_handlers_back(tmp_path):
    """serve() forwards Ctrl-C, SIGTERM and SIGHUP to the server while it runs; afterwards the
    caller's own handlers are in place again."""
    script = f"""
import signal, sys
from crashlab.supervise import ServeOptions, serve

def mine(signum, frame):
    pass

for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, mine)
outcome = serve(ServeOptions(command=[sys.executable, "-c", "pass"], runs_dir={str(tmp_path)!r},
                             echo=False))
assert outcome.result == "clean-exit", outcome
assert all(signal.getsignal(signum) is mine
           for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
print("restored")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "restored"
