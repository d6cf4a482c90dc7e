"""crashlab report end to end: ``crashlab serve`` runs the stand-in SGLang server (tests/standin,
it says so) until it crashes, then the real ``crashlab report`` makes the issue body and bundle.

Everything is real but the server: processes, HTTP, the run directory serve wrote, the tar.gz
read back with tarfile, the request pickle read back with crashlab's loader and ``crashlab
replay``.
"""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
import socket
import tarfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
import requests

from crashlab.textsize import with_bytes
from tests.conftest import run_cli
from tests.schema_check import errors
from tests.serve_harness import FAST, Serve, environment, free_port, sglang, survivors
from tests.test_report_markdown import BROKEN_NUMBER, header_cells
from tests.test_views_hostile import GITHUB_REFERENCE, _github_html

LIMIT = 65_536


def _crashed_run(tmp_path: Path, *extra: str, env: dict[str, str] | None = None,
                 prompt: str = "Hello", sampling: dict | None = None, command_prefix=()) -> Path:
    port = free_port()
    tmp_path.mkdir(parents=True, exist_ok=True)
    serve = Serve(tmp_path, [*command_prefix, *sglang(port, *extra)], *FAST,
                  env=env or environment(crash="gpu-fault"))
    serve.wait_healthy()
    requests.post(f"http://127.0.0.1:{port}/generate", timeout=10,
                  json={"text": prompt, "sampling_params": sampling or {"max_new_tokens": 3}})
    assert serve.finish() == 0, serve.stderr
    assert survivors(serve.manifest()) == []
    return serve.run_dir


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory) -> Path:
    """A run of two ranks: a FAULT coredump, a COLLATERAL one, a request dump; serve found no
    cuda-gdb to triage them with."""
    return _crashed_run(tmp_path_factory.mktemp("serve"), "--tp-size", "2",
                        env={**environment(crash="gpu-fault"), "CRASHLAB_CUDA_GDB": "/nonexistent/cuda-gdb"})


def bundle_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as bundle:
        return {member.name.split("/", 1)[1]: bundle.extractfile(member).read()
                for member in bundle.getmembers()}


def test_a_crashed_run_becomes_one_body_and_one_bundle_with_every_piece(gpu_run, tmp_path):
    done = run_cli("report", gpu_run, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    [body_file] = tmp_path.glob("crashlab-report-*.md")
    [bundle] = tmp_path.glob("crashlab-report-*.tar.gz")
    assert body_file.read_text() == body and len(body) <= LIMIT
    stderr = done.stderr.decode()
    assert f"body: {body_file}" in stderr
    assert f"bundle: {bundle}: {with_bytes(bundle.stat().st_size)}, 0 files left out" in stderr
    for heading in ("### Describe the bug", "### Reproduction", "### Environment", "### Triage",
                    "### Logs", "### Attachment"):
        assert f"\n{heading}\n" in "\n" + body
    assert "moe_align_block_size" in body and "SIGABRT" in body
    environment = body[body.index("### Environment"):body.index("### Triage")]
    assert ("The crashed machine, from the run's environment.json (captured by crashlab serve when the "
            "server was launched, ") in environment
    assert "The crashed machine, from the coredump `cores/core." in environment
    assert "- GPU 0: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" in environment
    assert "This machine" not in environment
    assert "Warp Out-of-range Address" in body and "moe_align.cu:24" in body
    assert "--restart-cmd" in body and "-m sglang.launch_server" in body
    assert "<details><summary>Log findings of incarnation 1</summary>" in body
    # serve's triage had no debugger: said once on the terminal, not in the issue
    assert "cuda-gdb" in (gpu_run / "report.json").read_text()
    assert "/nonexistent/cuda-gdb" not in body and "debugger view" not in body
    assert stderr.count("/nonexistent/cuda-gdb") == 1

    members = bundle_members(bundle)
    assert members["report.md"].decode() == body
    issue = json.loads(members["report.json"])
    assert errors(issue, "report-bundle") == []
    assert issue["left_out"] == [] and issue["bundle_bytes"] is None
    names = set(members)
    assert {"environment.json", "run/report.json", "run/manifest.json",
            "run/incarnation-1/launch.json", "run/incarnation-1/stderr.log"} <= names
    cores = sorted(n for n in names if n.startswith("cores/"))
    assert len(cores) == 2 and all(f"triage/{c.removeprefix('cores/')}.json" in names for c in cores)
    assert {m["name"] for m in issue["members"]} == names - {"report.md", "report.json"}
    [pickle] = [n for n in names if n.startswith("requests/")]
    assert f"crashlab replay {pickle} --url http://127.0.0.1:" in body
    # a member is the file serve collected, byte for byte, when nothing in it needed masking
    originals = sorted((gpu_run / "incarnation-1" / "cores").glob("core.*"))
    assert sorted(members[c] for c in cores) == sorted(p.read_bytes() for p in originals)
    assert bundle.stat().st_size < 25 * 10**6


def test_the_body_shows_times_as_they_are_and_every_table_has_a_header(gpu_run, tmp_path):
    done = run_cli("report", gpu_run, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    started = json.loads((gpu_run / "report.json").read_text())["incidents"][0]["started_at"]
    assert started[11:19] in body and started[11:19] in _github_html(body)  # 20:57:44, not 20:<!-- -->57:44
    assert not BROKEN_NUMBER.search(body)
    headers = header_cells(body)
    assert len(headers) >= 6 and all(cell.strip() for cell in headers), headers


def test_a_small_budget_leaves_the_largest_out_and_the_body_says_where_they_are(gpu_run, tmp_path):
    done = run_cli("report", gpu_run, "--out", tmp_path, "--max-size", "40k", "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    [bundle] = tmp_path.glob("*.tar.gz")
    assert bundle.stat().st_size <= 40_000 and issue["bundle_bytes"] == bundle.stat().st_size
    members = bundle_members(bundle)
    body = members["report.md"].decode()
    left = {Path(item["path"]).name: item for item in issue["left_out"]}
    assert any(name.startswith("core.") for name in left)
    for item in issue["left_out"]:
        assert item["path"].startswith(str(gpu_run))
        assert f"`{item['path']}`" in body
        assert Path(item["path"]).is_file()
        assert "budget" in item["reason"]
    assert "Left out of the bundle:" in body
    # what is in was tried first: the triage of the coredumps left out is still there
    assert all(f"triage/{name}.json" in members for name in left if name.startswith("core."))
    assert issue["members"] and all(not m["name"].startswith("cores/") or m["name"].split("/")[1] not in left
                                    for m in issue["members"])


def test_a_run_of_a_newer_crashlab_is_read_without_the_fields_this_one_does_not_know(gpu_run, tmp_path):
    run = tmp_path / gpu_run.name
    shutil.copytree(gpu_run, run, ignore=shutil.ignore_patterns("pipes"))  # fifos
    for name in ("environment.json", "manifest.json", "report.json"):
        saved = json.loads((run / name).read_text())
        (run / name).write_text(json.dumps({**saved, "numa_nodes": ["LATER-FIELD"]}))
    done = run_cli("report", run, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    assert issue["environment_origin"].startswith(
        "from the run's environment.json, captured by crashlab serve when the server was launched")
    with tarfile.open(tmp_path / "out" / Path(issue["bundle"]).name, "r:gz") as bundle:
        texts = [bundle.extractfile(m).read() for m in bundle.getmembers() if m.isfile()]
    assert texts and not any(b"LATER-FIELD" in text for text in texts)


def test_an_environment_json_of_another_schema_version_leaves_the_coredumps_facts(gpu_run, tmp_path):
    run = tmp_path / gpu_run.name
    shutil.copytree(gpu_run, run, ignore=shutil.ignore_patterns("pipes"))  # fifos
    saved = json.loads((run / "environment.json").read_text())
    (run / "environment.json").write_text(json.dumps({**saved, "schema_version": 2}))
    done = run_cli("report", run, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    assert issue["environment_origin"].startswith("from the coredump cores/core.")
    body = (tmp_path / "out" / Path(issue["body"]).name).read_text()
    assert ("_The crashed machine's environment is not known: the run's environment.json is not an "
            "environment crashlab wrote") in body
    assert "- GPU 0: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" in body
    assert not any(member["kind"] == "environment" for member in issue["members"])


def test_the_title_leads_with_the_signature_and_the_crashed_machines_versions(gpu_run, tmp_path):
    """The crashed machine as serve would have seen it on a GPU node (the stand-in run has no
    sglang or torch installed and no driver): its environment.json gives the versions."""
    run = tmp_path / gpu_run.name
    shutil.copytree(gpu_run, run, ignore=shutil.ignore_patterns("pipes"))  # fifos
    saved = json.loads((run / "environment.json").read_text())
    saved["packages"] = [{"name": "sglang", "status": "installed", "version": "0.5.6.post2"}]
    saved["torch"] = {"version": "2.9.1+cu130", "cuda": "13.0"}
    saved["driver"] = {"version": "580.65.06", "cuda_version": "13.0"}
    (run / "environment.json").write_text(json.dumps(saved))
    done = run_cli("report", run, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    title = json.loads(done.stdout)["title"]
    # the signature whole, then the versions that fit; no pid, no consequence
    assert title == ("[Bug] Warp Out-of-range Address in moe_align_block_size at moe_align.cu:24 "
                     "(sglang 0.5.6.post2, torch 2.9.1+cu130)")
    assert len(title) <= 120
    assert f"crashlab: title: {title}\n" in done.stderr.decode()
    body = next((tmp_path / "out").glob("*.md")).read_text()
    assert body.startswith("### Describe the bug\n\n**\\[Bug\\] Warp Out-of-range Address in "
                           "moe_align_block_size at moe_align.cu:24 (sglang 0.5.6.post2, torch")


def test_a_budget_too_small_for_the_report_itself_is_bad_input(gpu_run, tmp_path):
    done = run_cli("report", gpu_run, "--out", tmp_path, "--max-size", "2k")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1 and "too small for the report" in done.stderr.decode()
    assert list(tmp_path.iterdir()) == []  # no half bundle left behind


#: A launch as production writes it (every value here made up for the test).
PASSWORD = "Hunter2-db-password"
#: no well-known shape (not sk-..., hf_...): only knowing the launch's own key masks it everywhere
API_KEY = "PlainKey-abcdef-778899-zq"
INTERNAL_IP = "10.20.30.40"
PEER_IP = "172.16.99.7"
INTERNAL_HOST = "gpu-node-17.prod.example-corp.internal"
DB_HOST = "pg-primary.db.example-corp.internal"
USER = "alicesmith"
HOME = f"/home/{USER}"
PROMPT = "Summarise the medical record of patient Jane Roe, born 1970"
#: the machine serve ran on, as its run directory (<time>-<host>-<pid>) and manifest name it
SERVE_HOST = "gpu-worker-a1b2c3"


def _as_if_served_on(run: Path, host: str) -> Path:
    """The run as if serve had run on ``host``: its directory renamed, its manifest's host set
    (this machine's own name may be too short to look for in binary members)."""
    renamed = run.with_name(run.name.replace(f"-{socket.gethostname()}-", f"-{host}-", 1))
    assert renamed != run
    run.rename(renamed)
    manifest = json.loads((renamed / "manifest.json").read_text())
    manifest["crashlab"]["host"] = host
    (renamed / "manifest.json").write_text(json.dumps(manifest))
    return renamed


#: Credentials no rule can recognise: unshaped values, names that say nothing or only "auth".
UNSHAPED = {"WAREHOUSE_LOGIN": "Unshaped-Login-Value-5151", "MY_SERVICE_AUTH": "AuthValue-NotShaped-4242",
            "HF_ENDPOINT_AUTH": "HfSecretNotShaped123"}


def test_the_bundles_launch_keeps_the_values_of_reported_variables_only(tmp_path):
    env = environment(crash="gpu-fault")
    env.update(UNSHAPED, NCCL_DEBUG="INFO")
    run = _crashed_run(tmp_path / "serve", env=env)
    assert "Unshaped-Login-Value-5151" in (run / "incarnation-1" / "launch.json").read_text()
    out = tmp_path / "issue"
    done = run_cli("report", run, "--out", out)
    assert done.returncode == 0, done.stderr
    [bundle] = out.glob("*.tar.gz")
    members = bundle_members(bundle)
    for name, data in [*members.items(), ("body", done.stdout)]:
        for secret in UNSHAPED.values():
            assert secret.encode() not in data, (name, secret)
    launched = json.loads(members["run/incarnation-1/launch.json"])["environment"]
    assert launched["WAREHOUSE_LOGIN"] == launched["PATH"] == "***"  # names kept, values not
    assert launched["NCCL_DEBUG"] == "INFO" and launched["STANDIN_CRASH"] == "***"
    assert json.loads(members["environment.json"])["variables"]["HF_ENDPOINT_AUTH"] == "***"


def test_anonymize_keeps_no_host_user_address_secret_or_prompt_in_any_member(tmp_path):
    env = environment(crash="gpu-fault")
    env.update(PGPASSWORD=PASSWORD, DATABASE_URL=f"postgresql://svc:{PASSWORD}@{DB_HOST}:5432/jobs",
               HOSTNAME=INTERNAL_HOST, MASTER_ADDR=INTERNAL_IP, USER=USER, HOME=HOME,
               NCCL_SOCKET_IFNAME="eth0", HF_HOME=f"{HOME}/.cache/huggingface")
    run = _crashed_run(tmp_path / "serve", "--api-key", API_KEY, "--model-path", f"{HOME}/models/llama-3-8b",
                       env=env, prompt=PROMPT, sampling={"max_new_tokens": 7, "temperature": 0.3},
                       command_prefix=("env", f"SGLANG_DIST_INIT_ADDR={PEER_IP}:5000"))
    run = _as_if_served_on(run, SERVE_HOST)
    out = tmp_path / "issue"
    done = run_cli("report", run, "--out", out, "--anonymize", "--json", env={"USER": USER})
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    assert issue["anonymized"] is True
    [bundle] = out.glob("*.tar.gz")
    members = bundle_members(bundle)
    forbidden = [PASSWORD, API_KEY, INTERNAL_IP, PEER_IP, INTERNAL_HOST, "gpu-node-17", DB_HOST,
                 USER, HOME, PROMPT, "Jane Roe", SERVE_HOST]
    if len(socket.gethostname()) >= 4:
        forbidden.append(socket.gethostname())
    # the run directory itself holds them (masked secrets aside): the test is not vacuous
    launch = (run / "incarnation-1" / "launch.json").read_text()
    assert INTERNAL_HOST in launch and HOME in launch and INTERNAL_IP in launch
    for name, data in [*members.items(), ("body", (out / Path(issue["body"]).name).read_bytes()),
                       ("bundle name", bundle.name.encode())]:
        texts = [data, name.encode()]
        if data[:2] == b"\x1f\x8b":
            texts.append(gzip.decompress(data))
        for text in texts:
            for secret in forbidden:
                assert secret.encode() not in text, (name, secret)
    assert "192.0.2." in members["run/incarnation-1/launch.json"].decode()  # replaced, not dropped
    assert "API key is masked above" in members["report.md"].decode()
    # spelled as the option that asked for it, --anonymize
    body = (out / Path(issue["body"]).name).read_text()
    assert "Launch command (anonymized)" in body and "anonymised" not in body
    assert ".example" in members["run/manifest.json"].decode()

    # the anonymized pickle still loads and replays, with lengths and sampling parameters kept
    [pickle] = [n for n in members if n.startswith("requests/")]
    extracted = tmp_path / "extracted.pkl"
    extracted.write_bytes(members[pickle])
    listed = run_cli("replay", extracted, "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    [request] = json.loads(listed.stdout)["requests"]
    assert len(request["text"]) == len(PROMPT) and request["text"] != PROMPT
    assert request["sampling_params"]["max_new_tokens"] == 7
    assert request["sampling_params"]["temperature"] == 0.3
    original = run_cli("replay", next((run / "incarnation-1" / "requests").rglob("*.pkl")), "--json")
    [recorded] = json.loads(original.stdout)["requests"]
    assert request["created"] == recorded["created"] and request["finished"] == recorded["finished"]


def test_the_body_links_and_mentions_nothing_on_github(tmp_path):
    """Outside text that GitHub would link (mentions, issue references, emoji, URLs) reaches the
    body through the crash's own exception line, the title and the log findings."""
    hook = tmp_path / "hook.py"
    hook.write_text('raise RuntimeError("@octocat see #12 and owner/repo#7 :tada: GH-3 '
                    'www.evil.example https://evil.example/x")\n')
    env = environment(crash="exit", crash_hook=str(hook))
    run = _crashed_run(tmp_path / "serve", env=env, prompt="@octocat #12")
    done = run_cli("report", run, "--out", tmp_path / "issue")
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    assert "octocat" in body and "evil" in body
    html = _github_html(body)
    assert "<a " not in html

    class Nodes(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.open, self.linked = [], []

        def handle_starttag(self, tag, attrs):
            self.open.append(tag)

        def handle_endtag(self, tag):
            if tag in self.open:
                del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]

        def handle_data(self, data):
            if not {"code", "pre"} & set(self.open) and GITHUB_REFERENCE.search(data):
                self.linked.append(data)

    nodes = Nodes()
    nodes.feed(html)
    assert nodes.linked == []


def test_a_python_crash_is_described_by_its_exception_and_its_innermost_frames(tmp_path):
    """A scheduler exception caught by serve leaves no coredump: "Describe the bug" says the
    exception and where it was raised (the stand-in rank's own frame), not only the title."""
    own = {"CRASHLAB_DB": str(tmp_path / "index.sqlite")}  # the session's holds other runs' crashes
    env = {**environment(crash="scheduler-exception"), **own}
    run = _crashed_run(tmp_path / "serve", env=env)
    done = run_cli("report", run, "--out", tmp_path / "issue", env=own)
    assert done.returncode == 0, done.stderr
    body = done.stdout.decode()
    described = body[:body.index("### Reproduction")]
    assert "- Exception: `RuntimeError: CUDA error: an illegal memory access was encountered`" in described
    assert "rank.py:" in described and "scheduler_exception" in described
    assert "### Across the fleet" not in body  # one crash: no fleet to speak of


def test_the_replay_commands_restart_cmd_keeps_the_launch_environment(tmp_path):
    """serve recorded the launch's environment (environment.json's variables: those that steer
    CUDA, NCCL, torch and SGLang): the --restart-cmd report prints starts the server under
    ``env`` with each of them, the launch command after; a masked one (a secret) is left out
    and the body names it."""
    env = environment(crash="gpu-fault")
    env.update(NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="0,1", HF_ENDPOINT_AUTH="HfSecretNotShaped123")
    run = _crashed_run(tmp_path / "serve", env=env)
    recorded = json.loads((run / "environment.json").read_text())["variables"]
    assert recorded["NCCL_DEBUG"] == "INFO" and recorded["HF_ENDPOINT_AUTH"] == "***"
    done = run_cli("report", run, "--out", tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    issue = json.loads(done.stdout)
    [summary] = issue["request_dumps"]
    replay = shlex.split(summary["replay"])
    restart = shlex.split(replay[replay.index("--restart-cmd") + 1])
    launch = shlex.split(issue["launch"])
    assert restart[0] == "env" and restart[len(restart) - len(launch):] == launch
    assignments = dict(word.split("=", 1) for word in restart[1:len(restart) - len(launch)])
    assert assignments == {name: value for name, value in recorded.items() if value != "***"}
    assert assignments["CUDA_VISIBLE_DEVICES"] == "0,1"
    body = next((tmp_path / "out").glob("*.md")).read_text()
    assert f"```\n{summary['replay']}\n```" in body
    assert "`HF_ENDPOINT_AUTH`" in body.split("### Reproduction")[1].split("### ")[0]
