"""crashlab report on a coredump or a request dump given alone, its bad inputs, and its parts: the
budgeted tar.gz, sizes, the anonymizer. Real files throughout: the bundled synthetic coredumps,
the request dumps real SGLang wrote (fixtures/sglang_dumps/real/), real gzip and tar."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import signal
import subprocess
import sysconfig
import tarfile
import time
from pathlib import Path

import pytest
import requests

from crashlab.errors import BadInput
from crashlab.issue import relaunch, title
from crashlab.issue.tarball import END, BudgetedTarball
from crashlab.privacy.anonymize import Anonymizer
from crashlab.replay import loader, writer
from crashlab.textsize import parse_size
from tests.conftest import ROOT, free_port, run_cli
from tests.serve_harness import environment, wait_for
from tests.test_report_verb import bundle_members

FAULT_CORE = ROOT / "fixtures" / "synthetic" / "moe_align_out_of_range.nvcudmp"
HANG_CORE = ROOT / "fixtures" / "synthetic" / "hang_no_exception.nvcudmp"
REAL_DUMP = ROOT / "fixtures" / "sglang_dumps" / "real" / "crash_dump_real_0.5.23.pkl"


def test_a_coredump_alone_describes_the_machine_that_crashed_from_its_own_tables(tmp_path):
    """This machine has no GPU and no torch; the dump was written on an H100 (driver 580.65)."""
    done = run_cli("report", FAULT_CORE, "--out", tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    members = bundle_members(next(tmp_path.glob("*.tar.gz")))
    body = members["report.md"].decode()
    assert "moe_align_block_size" in body and "moe_align.cu:24" in body
    assert "nothing to replay" in body and "launch command is not known" in body
    environment = body[body.index("### Environment"):body.index("### Triage")]
    assert "The crashed machine, from the coredump `cores/moe_align_out_of_range.nvcudmp`:" in environment
    assert "- NVIDIA driver: 580.65\n- Driver CUDA version: 13.0\n" in environment
    assert "- GPU 0: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" in environment
    assert "not known: no run directory was given" in environment
    for this_machine in ("GPUs: none found", "torch: absent", "Python executable", "NVCC"):
        assert this_machine not in environment
    assert issue["environment_origin"].startswith("from the coredump cores/moe_align_out_of_range.nvcudmp")
    assert members["cores/moe_align_out_of_range.nvcudmp"] == FAULT_CORE.read_bytes()
    triage = json.loads(members["triage/moe_align_out_of_range.nvcudmp.json"])
    assert triage["faults"][0]["exception"]["display"] == "Warp Out-of-range Address"
    assert not any("environment.json" in name for name in members)
    # a global-scope moe_align_block_size is sgl-kernel's or vllm's alike: no prefix names it
    owner = triage["faults"][0]["owner"]
    assert (owner["artifact"], owner["version"]) == ("unknown", None)
    assert "- Owner: unknown\n" in body


def test_this_machine_is_described_only_when_asked_and_labelled_as_such(tmp_path):
    done = run_cli("report", FAULT_CORE, "--out", tmp_path, "--this-machine")
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    environment = body[body.index("### Environment"):body.index("### Triage")]
    label = ("This machine, where the report was made (not the one that crashed), asked for with "
             "`--this-machine`:\n\n```\nPython: ")
    assert label in environment and "- GPU 0: NVIDIA H100 80GB HBM3" in environment
    members = bundle_members(next(tmp_path.glob("*.tar.gz")))
    assert json.loads(members["this-machine.environment.json"])["python"]["version"]
    assert "environment.json" not in members


#: A debugger that cannot be run on the machine making the report.
NO_DEBUGGER = {"CRASHLAB_CUDA_GDB": "/nonexistent/cuda-gdb"}


def test_what_the_reporting_machine_lacks_is_said_on_the_terminal_not_in_the_issue(tmp_path):
    done = run_cli("report", FAULT_CORE, "--out", tmp_path, env=NO_DEBUGGER)
    assert done.returncode == 0, done.stderr
    body, stderr = done.stdout.decode(), done.stderr.decode()
    assert "/nonexistent/cuda-gdb" not in body and "Debugger:" not in body and "debugger" not in body
    [said] = [line for line in stderr.splitlines() if "/nonexistent/cuda-gdb" in line]
    assert said.startswith("crashlab: no debugger view in the report")
    # the bundle's triage still says what happened
    triage = json.loads(bundle_members(next(tmp_path.glob("*.tar.gz")))[
        "triage/moe_align_out_of_range.nvcudmp.json"])
    assert triage["debugger"]["status"] == "unavailable"


def test_every_heading_of_a_coredumps_body_reads_as_a_heading_on_github(tmp_path):
    """The dump's triage nests under the body's "#### `core`": its faults are h5, its title a bold
    line; nothing is h6, which GitHub renders small and grey."""
    from markdown_it import MarkdownIt

    done = run_cli("report", FAULT_CORE, "--out", tmp_path, env=NO_DEBUGGER)
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    levels = [int(t.tag[1]) for t in MarkdownIt("commonmark").enable("table").parse(body)
              if t.type == "heading_open"]
    assert levels and max(levels) == 5, levels
    assert any(line.startswith("##### Fault 1: ") for line in body.splitlines())


def test_a_coredump_without_exception_is_written_and_exits_1(tmp_path):
    done = run_cli("report", HANG_CORE, "--out", tmp_path)
    assert done.returncode == 1, done.stderr
    assert "fake_allreduce_wait" in done.stdout.decode()
    assert len(list(tmp_path.glob("*.tar.gz"))) == 1


def test_a_request_dump_alone_gets_a_replay_command_from_its_launch_and_loads_again(tmp_path):
    dump = tmp_path / "in" / REAL_DUMP.name
    dump.parent.mkdir()
    shutil.copy(REAL_DUMP, dump)
    loaded = loader.load(dump)
    writer.write_subset(loaded, loaded.requests[:2], dump.with_name(dump.stem + ".min.pkl"))
    done = run_cli("report", dump, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    [summary] = issue["request_dumps"]
    assert summary["requests"] == len(loaded.requests) and summary["layout"] == loaded.layout
    assert summary["replay"].startswith(f"crashlab replay {summary['member']} --url http://127.0.0.1:30000 "
                                        "--restart-cmd ")
    # SGLang recorded .../site-packages/sglang/launch_server.py first: its interpreter runs the module
    assert ("/opt/sglang-venv/bin/python3.11 -m sglang.launch_server --model-path /tmp/crashlab-model"
            in summary["replay"])
    assert issue["launch"].startswith("/opt/sglang-venv/bin/python3.11 -m sglang.launch_server --model-path")
    members = bundle_members(next((tmp_path / "out").glob("*.tar.gz")))
    body = members["report.md"].decode()
    assert "Minimized reproducer" in body and summary["minimized"] in members
    for name, count in ((summary["member"], len(loaded.requests)), (summary["minimized"], 2)):
        extracted = tmp_path / Path(name).name
        extracted.write_bytes(members[name])
        listed = run_cli("replay", extracted, "--list", "--json")
        assert listed.returncode == 0, listed.stderr
        requests = json.loads(listed.stdout)["requests"]
        assert len(requests) == count
        assert [r["text"] for r in requests] == [r.text for r in loaded.requests[:count]]  # not anonymized


def test_the_launch_a_request_dump_recorded_is_written_as_a_command_that_runs(tmp_path):
    """SGLang records ``" ".join(sys.argv)``: the module's file first, which a shell cannot run
    (exit 126). The report's command is run here, against the stand-in sglang (tests/standin, not
    SGLang), until it answers /health."""
    port = free_port()
    site = sysconfig.get_paths()["purelib"]  # the recorded file is in this interpreter's site folder
    loaded = loader.load(REAL_DUMP)
    loaded._root = {**loaded._root, "launch_command": (
        f"{site}/sglang/launch_server.py --model-path stand-in/model --host 127.0.0.1 --port {port} "
        "--api-key PlainKey-778899-zq")}
    dump = tmp_path / "crash_dump.pkl"
    writer.write_subset(loaded, loaded.requests, dump)
    done = run_cli("report", dump, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    launch = json.loads(done.stdout)["launch"]
    assert "launch_server.py" not in launch and "PlainKey" not in launch
    body = next((tmp_path / "out").glob("*.md")).read_text()
    assert f"```\n{launch}\n```" in body
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(["bash", "-c", launch], stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True, env=environment())
    try:
        wait_for(lambda: server.poll() is not None or b"ready to roll" in log.read_bytes(),
                 "the server to start or exit")
        assert server.poll() is None, log.read_text()  # 126: not executable, 127: not found
        assert requests.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # the server and its ranks
        server.wait()


@pytest.mark.parametrize("recorded, runnable", [
    ("/usr/lib/python3/dist-packages/sglang/launch_server.py --port 1",
     "/usr/bin/python3 -m sglang.launch_server --port 1"),
    ("/home/u/sglang/python/sglang/launch_server.py --port 1", "python3 -m sglang.launch_server --port 1"),
    ("/srv/serve.py --port 1", "python3 /srv/serve.py --port 1"),
    ("python3 -m sglang.launch_server --port 1", "python3 -m sglang.launch_server --port 1"),
    ("sglang serve --port 1", "sglang serve --port 1"),
])
def test_a_recorded_launch_runs_through_its_interpreter(recorded, runnable):
    assert shlex.join(relaunch.runnable(shlex.split(recorded))) == runnable


VERSIONS = ["sglang 0.5.6.post2", "torch 2.9.1+cu130", "driver 580.65.06", "CUDA 13.0"]


@pytest.mark.parametrize("headline, expected", [
    ("Warp Illegal Address in k at a.cu:1",
     "[Bug] Warp Illegal Address in k at a.cu:1 (sglang 0.5.6.post2, torch 2.9.1+cu130, driver 580.65.06, "
     "CUDA 13.0)"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered in scheduler at tp_worker.py:123 "
     "and more",
     "[Bug] RuntimeError: CUDA error: an illegal memory access was encountered in… (sglang 0.5.6.post2, "
     "torch 2.9.1+cu130)"),
    ("x" * 300, "[Bug] " + "x" * 73 + "… (sglang 0.5.6.post2, torch 2.9.1+cu130)"),
    ("two\nlines\x1b[31m", "[Bug] two lines\\x1b[31m (sglang 0.5.6.post2, torch 2.9.1+cu130, driver "
                          "580.65.06, CUDA 13.0)"),
])
def test_a_title_is_one_line_of_at_most_120_characters_cut_at_a_word(headline, expected):
    made = title.make(headline, VERSIONS)
    assert made == expected and len(made) <= 120


@pytest.mark.parametrize("args, message", [
    ((), "needs a run directory, a bisect's folder, a coredump or a request dump"),
    (("no/such/file",), "no/such/file: no such file or directory"),
    (("fixtures",), "not a crashlab run directory"),
    ((str(FAULT_CORE), "--max-size", "ten"), "--max-size 'ten': not a size"),
    ((str(FAULT_CORE), "--max-size", "0"), "must be more than 0 bytes"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    done = run_cli("report", *args, "--out", tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 2 and message in stderr, stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content, message", [
    (b"", "empty"),
    (b"\x80\x04garbage", "gar"),
    (b"not a coredump at all", "not"),
])
def test_a_file_that_is_neither_a_coredump_nor_a_request_dump_is_refused(tmp_path, content, message):
    bad = tmp_path / "input.bin"
    bad.write_bytes(content)
    done = run_cli("report", bad, "--out", tmp_path / "out")
    stderr = done.stderr.decode()
    assert done.returncode == 2 and stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert str(bad) in stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize("name", ["rand.pkl", "notes.nvcudmp"])
def test_a_file_that_starts_as_neither_is_named_as_neither_in_one_line(tmp_path, name):
    """Random bytes (under a request dump's suffix or a coredump's) are neither an ELF file nor
    a pickle: one line says it is neither kind report reads, not only that it is no coredump."""
    bad = tmp_path / name
    bad.write_bytes(bytes([0xc5, 0x5a, 0x1e, 0xa7]) + os.urandom(4000))
    done = run_cli("report", name, "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().splitlines() == [
        f"crashlab: {name}: neither a CUDA coredump nor an SGLang crash dump (it starts with "
        "c5 5a 1e a7: not an ELF file, not a pickle)"]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


#: A real H200 dump (fixtures/gpu/PROVENANCE.md), small enough to triage in a few seconds.
REAL_CORE = ROOT / "fixtures" / "gpu" / "h200" / "tp_ranks.explain" / "core.1972.nvcudmp"


def test_a_dump_given_twice_is_triaged_and_bundled_once(tmp_path):
    """The same real dump by a relative path, by its absolute path and as a copy (the same
    bytes), with a real request dump given twice: one triage, one coredump and one request dump
    in the bundle, and a line on stderr for each input read once."""
    (tmp_path / "dumps").mkdir()
    shutil.copy(REAL_CORE, tmp_path / "dumps" / REAL_CORE.name)
    shutil.copy(REAL_CORE, tmp_path / "copy.nvcudmp")
    shutil.copy(REAL_DUMP, tmp_path / REAL_DUMP.name)
    given = [f"dumps/{REAL_CORE.name}", str(tmp_path / "dumps" / REAL_CORE.name), "copy.nvcudmp",
             REAL_DUMP.name, f"./{REAL_DUMP.name}"]
    done = run_cli("report", *given, "--no-explain", "--json", "--out", tmp_path / "out",
                   cwd=tmp_path, env=NO_DEBUGGER)
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    names = sorted(member["name"] for member in issue["members"])
    assert names == [f"cores/{REAL_CORE.name}", f"requests/{REAL_DUMP.name}",
                     f"triage/{REAL_CORE.name}.json"], names
    assert len(issue["request_dumps"]) == 1
    said = [line for line in done.stderr.decode().splitlines() if "read once" in line]
    assert said == [
        f"crashlab: {given[1]}: the same file as {given[0]}, given before: read once",
        f"crashlab: copy.nvcudmp: the same bytes as {given[0]}, given before: read once",
        f"crashlab: ./{REAL_DUMP.name}: the same file as {REAL_DUMP.name}, given before: read once"]


def test_the_tarball_cuts_a_member_that_does_not_fit_and_never_passes_its_budget(tmp_path):
    noise = os.urandom(60_000)  # incompressible
    path = tmp_path / "b.tar.gz"
    tarball = BudgetedTarball(path, 50_000, "top")
    assert tarball.add("small.txt", b"hello " * 1000) is not None
    before = tarball.used
    assert tarball.add("noise.bin", noise) is None
    assert tarball.used == before and path.with_name(f".{path.name}.tmp-{os.getpid()}").stat().st_size == before
    fitting = os.urandom(30_000)
    assert tarball.add("fits.bin", fitting) is not None
    size = tarball.close()
    assert not path.exists()  # in place only when told
    tarball.put_in_place()
    assert size == path.stat().st_size <= 50_000
    with tarfile.open(path, "r:gz") as bundle:
        assert bundle.getnames() == ["top/small.txt", "top/fits.bin"]
        assert bundle.extractfile("top/fits.bin").read() == fitting
    assert path.read_bytes().endswith(END)


def test_sizes_read_as_people_write_them():
    assert parse_size("25MB") == 25_000_000 and parse_size("10M") == 10_000_000
    assert parse_size("500k") == 500_000 and parse_size("1.5GiB") == 1_610_612_736
    assert parse_size("4096") == 4096 and parse_size(" 2 kib ") == 2048
    for bad in ("", "MB", "-1k", "1 parsec", "1e9"):
        with pytest.raises(BadInput):
            parse_size(bad)


def test_the_anonymizer_replaces_places_and_people_and_keeps_what_is_not_one():
    anonymizer = Anonymizer.for_launch(
        ["python", "-m", "sglang.launch_server", "--host", "node7.cluster.example.org",
         "--dist-init-addr", "10.1.2.3:5000"], {"USER": "bobjones", "MASTER_ADDR": "gpu-a.corp"},
        hosts=["buildhost"])
    text = anonymizer.text(
        "bobjones@node7.cluster.example.org:/home/bobjones/x 10.1.2.3 fd00:1:2::7 gpu-a.corp "
        "node7 x.y.svc.cluster.local buildhost | kept: 127.0.0.1 0.0.0.0 12:00:01.103 "
        "threading.local 580.65.06 std::vector fe80::1 torch.cuda nvidia-cudnn-cu12==9.1.0.70")
    for gone in ("bobjones", "node7", "10.1.2.3", "fd00:1:2::7", "gpu-a.corp", "svc.cluster", "buildhost"):
        assert gone not in text, gone
    assert "/home/user1/x" in text and "192.0.2.1" in text and "2001:db8::" in text
    assert text.endswith("kept: 127.0.0.1 0.0.0.0 12:00:01.103 threading.local 580.65.06 "
                         "std::vector fe80::1 torch.cuda nvidia-cudnn-cu12==9.1.0.70")
    assert anonymizer.text("node7.cluster.example.org") == anonymizer.text("node7.cluster.example.org")


def test_a_known_host_goes_wherever_it_stands_between_non_alphanumerics_in_any_case():
    anonymizer = Anonymizer.for_launch(["python", "-m", "sglang.launch_server"], {
        "SGLANG_HOST_IP": "gpu-node-3", "NCCL_COMM_ID": "infer-b7.cluster:29500",
        "SGLANG_USE_MASTER": "true", "MY_SERVER": "1"}, hosts=["gpu-worker-a1b2c3"])
    text = anonymizer.text("/runs/20261123-231840-gpu-worker-a1b2c3-5846/x GPU-WORKER-A1B2C3 "
                           "rank@gpu-node-3:5000 Infer-B7.cluster")
    for gone in ("gpu-worker", "GPU-WORKER", "gpu-node-3", "Infer-B7", "infer-b7"):
        assert gone not in text, gone
    assert text.startswith("/runs/20261123-231840-host-1.example-5846/x host-1.example ")
    # a switch or a number in a host-named variable is no host: it stays everywhere
    assert anonymizer.text("true 1 gpu-worker-a1b2c3x") == "true 1 gpu-worker-a1b2c3x"


def test_a_short_private_or_global_ipv6_is_replaced_and_only_link_local_is_kept():
    anonymizer = Anonymizer()
    text = anonymizer.text("[fd00::17]:29500 fc00::2 2606:4700::1 fe80::1 ::1")
    assert "fd00::17" not in text and "fc00::2" not in text and "2606:4700::1" not in text
    assert text.endswith(" fe80::1 ::1") and text.count("2001:db8::") == 3


def _core_with(tmp_path: Path, tail: bytes, *, straddle: bytes = b"", packed: bool = False) -> Path:
    """The synthetic FAULT coredump with ``tail`` appended (after zeros that put the reader's
    first chunk boundary right before ``straddle`` in it, when given), gzip-compressed when
    ``packed``."""
    data = FAULT_CORE.read_bytes()
    if straddle:
        data += bytes((1 << 20) - len(data) - tail.index(straddle))
    data += tail
    core = tmp_path / ("core.nvcudmp.gz" if packed else "core.nvcudmp")
    tmp_path.mkdir(exist_ok=True)
    core.write_bytes(gzip.compress(data) if packed else data)
    return core


@pytest.mark.parametrize("tail, what, options", [
    (b"\0/home/alicesmith/models/m\0", "a home folder", {}),
    (b"\0gpu-7.prod.example-corp.internal\0", "a private host name", {}),
    (b"\0MASTER=10.20.30.40\0", "an IPv4 address", {"straddle": b"30.40"}),  # neither half is one
    (b"\0[fd00:dead:beef::17]:29500\0", "an IPv6 address", {"packed": True}),
], ids=["home", "host", "ipv4-across-chunks", "ipv6-gzip"])  # ids: PYTEST_CURRENT_TEST is read too
def test_anonymize_leaves_out_a_coredump_holding_a_place_or_person_it_had_not_learned(
        tmp_path, tail, what, options):
    clean = run_cli("report", _core_with(tmp_path / "clean", b"\x00127.0.0.1 fe80::1 ::1\x00"),
                    "--anonymize", "--json", "--out", tmp_path / "clean-out")
    assert clean.returncode == 0 and json.loads(clean.stdout)["left_out"] == []  # bundled
    core = _core_with(tmp_path, tail, **options)
    done = run_cli("report", core, "--anonymize", "--json", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    [left] = issue["left_out"]
    assert left["kind"] == "coredump" and left["reason"].startswith(f"it holds {what},")
    assert not any(m["name"].startswith("cores/") for m in issue["members"])
    assert run_cli("report", core, "--json", "--out", tmp_path / "plain").returncode == 0


def test_an_out_folder_that_cannot_be_written_is_an_environment_problem():
    unwritable = Path("/sys/kernel")  # exists; no one may create a file in it, root included
    done = run_cli("report", FAULT_CORE, "--out", unwritable)
    stderr = done.stderr.decode()
    assert done.returncode == 3 and stderr.count("\n") == 1, stderr
    assert "the report cannot be written: /sys/kernel/crashlab-report-" in stderr
    assert "crashlab bug" not in stderr and done.stdout == b""


def test_reports_made_in_the_same_second_into_one_folder_keep_each_their_own_files(tmp_path):
    now = time.time()
    decoys = {}
    for second in range(-2, 120):  # every name a report could take in the next two minutes
        stem = f"crashlab-report-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now + second))}"
        for suffix in (".md", ".tar.gz"):
            decoys[tmp_path / (stem + suffix)] = f"an earlier report {second}".encode()
    for path, content in decoys.items():
        path.write_bytes(content)
    done = run_cli("report", FAULT_CORE, "--out", tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    assert all(path.read_bytes() == content for path, content in decoys.items())
    body, bundle = Path(issue["body"]), Path(issue["bundle"])
    assert body.name.endswith("-2.md") and bundle.name == body.name.replace(".md", ".tar.gz")
    assert body.read_text() == bundle_members(bundle)["report.md"].decode()


def test_a_damaged_minimized_reproducer_is_left_out_and_the_report_still_made(tmp_path):
    dump = tmp_path / "in" / REAL_DUMP.name
    dump.parent.mkdir()
    shutil.copy(REAL_DUMP, dump)
    minimized = dump.with_name(dump.stem + ".min.pkl")
    minimized.write_bytes(REAL_DUMP.read_bytes()[:200])  # cut short
    done = run_cli("report", dump, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    [left] = issue["left_out"]
    assert left["path"] == str(minimized) and left["kind"] == "request-dump"
    assert left["reason"].startswith("crashlab's loader refuses it, so it cannot be cleaned (")
    [summary] = issue["request_dumps"]
    assert summary["member"] in {m["name"] for m in issue["members"]} and summary["minimized"] is None


def test_a_triage_taken_out_is_listed_under_its_own_name_from_its_coredump(tmp_path):
    for budget in ("5k", "4500", "4k", "6k"):  # the environment's size varies by machine
        out = tmp_path / budget
        done = run_cli("report", FAULT_CORE, "--max-size", budget, "--out", out, "--json")
        assert done.returncode == 0, done.stderr
        issue = json.loads(done.stdout)
        left = {item["member"]: item for item in issue["left_out"]}
        if "triage/moe_align_out_of_range.nvcudmp.json" in left:
            break
    else:
        pytest.fail(f"no budget took the triage out: {left}")
    triage = left["triage/moe_align_out_of_range.nvcudmp.json"]
    assert triage["path"] == str(FAULT_CORE) and triage["kind"] == "triage"
    body = Path(issue["body"]).read_text()
    assert (f"- `triage/moe_align_out_of_range.nvcudmp.json`, from `{FAULT_CORE}` (triage, ") in body
    assert f"- `cores/moe_align_out_of_range.nvcudmp`, from `{FAULT_CORE}` (coredump, " in body


def test_a_log_line_is_cleaned_before_it_is_cut(tmp_path):
    from crashlab.issue.members import LOG_LINE_CHARS, log_excerpt
    from crashlab.privacy.policy import Privacy

    secret, host = "Unshaped-Db-Secret-77", "gpu-worker-a1b2c3"
    log = tmp_path / "stderr.log"
    log.write_text(f"{'x' * (LOG_LINE_CHARS - 8)} {secret} tail\n{'y' * (LOG_LINE_CHARS - 6)} {host}\nend\n")
    privacy = Privacy.for_launch([], {"DB_PASSWORD": secret}, True, [host], [])
    lines = log_excerpt(log, privacy, "stderr.log").decode().splitlines()
    assert lines[1] == "x" * (LOG_LINE_CHARS - 8) + " *** tai"
    assert lines[2] == "y" * (LOG_LINE_CHARS - 6) + " host-" and lines[3] == "end"
    assert all(len(line) <= LOG_LINE_CHARS for line in lines[1:])


def test_random_bytes_like_gpu_memory_or_machine_code_hold_no_place_or_person():
    import random

    from crashlab.privacy.anonymize import place_or_person_in

    noise = random.Random(16).randbytes(16 << 20)  # holds 1::6, 0C:: and their kind by chance
    assert place_or_person_in(noise) is None
    assert place_or_person_in(noise + b"\0fd00:dead:beef::17\0") == "an IPv6 address"
