"""crashlab report over a bisect's folder: a real ``crashlab bisect`` on the stand-in history
(tests/bisect_history.py: the stand-in SGLang server, real processes and HTTP on 127.0.0.1), its
real output folder given to the real ``crashlab report``, alone and beside the request dump it
replayed. The history: a clean start, another crash for a while (skipped), then the crash,
brought by a commit whose subject and file name are hostile Markdown and HTML with a terminal
escape, and whose crash line echoes a credential the report's shell knows (bisect's did not)."""

from __future__ import annotations

import json
import shutil

import pytest

from crashlab.bisect.model import Step, label
from crashlab.escape import escape
from crashlab.issue import body
from crashlab.issue.command import ReportOptions, make
from crashlab.privacy.redact import MASK
from crashlab.report.markdown_escape import CUT_NOTE
from tests.bisect_history import CRASH, FAST, OTHER, commit, git, launch
from tests.conftest import run_cli
from tests.replay_support import free_port, synthetic
from tests.schema_check import errors
from tests.test_report_verb import bundle_members
from tests.test_views_hostile import _github_html, _github_sees

#: a credential whose shape no rule knows: only its secret-named variable in the report's shell
#: masks it
SECRET = "Unshaped-Bisect-Credential-5150"
SECRET_ENV = {"WAREHOUSE_TOKEN": SECRET}
#: the first bad commit's subject: Markdown, HTML, a link, a mention, an issue reference and a
#: terminal escape, all of which must render as text
SUBJECT = "kernel: **wider** <img src=x onerror=alert(1)> [tile](https://evil.example) @octocat #12 \x1b[2J"
#: a file the first bad commit adds: its name is outside text too
HOSTILE_FILE = "tile<b>`x`.md"
#: a private host the crash line names: --anonymize replaces it
INTERNAL_HOST = "gpu-node-17.prod.example-corp.internal"


@pytest.fixture(scope="module")
def bisected(tmp_path_factory):
    """(the bisect's output folder, its dump, the commits by role, the repository)."""
    root = tmp_path_factory.mktemp("bisected")
    repo = root / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    crash = f"{CRASH} while loading with {SECRET} from {INTERNAL_HOST}"
    made = {"good": commit(repo, "app: serve")}
    made["docs"] = commit(repo, "docs: a readme", touch="README")
    made["other"] = commit(repo, "scheduler: an assert", crash=OTHER)
    made["other-gone"] = commit(repo, "scheduler: drop the assert")
    made["crash"] = commit(repo, SUBJECT, crash=crash, touch=HOSTILE_FILE)
    made["bad"] = commit(repo, "docs: the tile", crash=crash, touch="TILE")
    port, out, dump = free_port(), root / "crashlab-bisect", synthetic(root, 3)
    done = run_cli("bisect", "--good", made["good"], "--bad", "main", "--repo", repo, "--dump", dump,
                   "--url", f"http://127.0.0.1:{port}", "--out", out, "--repeat", "1", *FAST,
                   "--", *launch(repo, port, root / "starts"), timeout=300)
    assert done.returncode == 0, done.stderr
    return out, dump, made, repo


def _report(tmp_path, *inputs, json_out=False, options=()):
    out = tmp_path / "issue"
    done = run_cli("report", *inputs, "--out", out, *(["--json"] if json_out else []), *options,
                   env=SECRET_ENV)
    assert done.returncode == 0, done.stderr
    [bundle] = out.glob("*.tar.gz")
    [body_file] = out.glob("*.md")
    return done, body_file.read_text(), bundle_members(bundle)


def test_the_body_gives_the_bisects_verdict_and_the_bundle_its_files(bisected, tmp_path):
    out, dump, made, repo = bisected
    result = json.loads((out / "result.json").read_text())
    done, text, members = _report(tmp_path, out, dump, json_out=True)
    issue = json.loads(done.stdout)
    assert errors(issue, "report-bundle") == []
    # the section stands between Reproduction and Environment; the replay command is there too
    assert text.index("### Reproduction") < text.index("### Bisect") < text.index("### Environment")
    assert "crashlab replay requests/" in text
    seen = _github_sees(text, "li")[0]
    first = result["first_bad"]
    assert first["hash"] == made["crash"]
    assert f"First bad commit: {made['crash']} {escape(SUBJECT)}" in seen
    assert f"Author date: {git(repo, 'show', '-s', '--format=%aI', made['crash'])}" in seen
    assert sorted(first["files"]) == sorted(["app.py", HOSTILE_FILE])  # what the commit wrote
    assert f"Files changed: {', '.join(first['files'])}" in seen
    # the skip, with the other crash's signature
    [skip] = result["skips"]
    assert skip["revision"]["hash"] == made["other"]
    signature = skip["runs"][-1]["signature_hash"]
    assert signature and f"signature {signature}" in skip["reason"] and OTHER in skip["reason"]
    assert f"{made['other'][:12]} scheduler: an assert: {skip['reason']}" in seen
    # the rate, the runs for a good verdict and the confidence, as the bisect measured them
    assert (f"reproduced it at rate {result['bad_rate']:.2f}, at least "
            f"{result['bad_rate_bound']:.2f} at {result['confidence']:.0%} confidence; a good "
            f"verdict takes {result['runs_for_good']} clean run") in text
    # the step table: a row per step, in order, as the step log has them
    table = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert table[0] == "| verdict | revision | k/N | reason |"
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table[1:]]
    logged = [Step.model_validate_json(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [(row[0], row[1].strip("`"), row[2]) for row in rows] == \
        [(step.verdict, label(step.revision), f"{step.reproduced}/{len(step.runs)}") for step in logged]
    # the bundle: the verdict and the step log under bisect/, early, listed as members
    assert json.loads(members["bisect/result.json"])["first_bad"]["hash"] == made["crash"]
    bundled_steps = [json.loads(line) for line in members["bisect/steps.jsonl"].decode().splitlines()]
    assert [step["revision"] for step in bundled_steps] == \
        [step.model_dump(mode="json")["revision"] for step in logged]
    listed = [member["name"] for member in issue["members"]]
    assert {"bisect/result.json", "bisect/steps.jsonl"} <= set(listed)
    assert all(member["kind"] == "bisect" for member in issue["members"]
               if member["name"].startswith("bisect/"))
    [pickle] = [name for name in listed if name.startswith("requests/")]
    assert listed.index("bisect/result.json") < listed.index("bisect/steps.jsonl") < listed.index(pickle)
    assert "`bisect/steps.jsonl` in the attached bundle" in text
    assert issue["found"] is True and issue["shortened"] == []


def test_a_secret_in_a_crash_line_is_masked_in_the_body_and_the_bundle(bisected, tmp_path):
    """bisect's shell did not hold the credential, so its files keep it; the report's shell does,
    and neither the body nor any member of the bundle has it. The folder alone: Reproduction
    points at the reproducer the bisect replayed."""
    out, dump, _, _ = bisected
    assert SECRET in (out / "result.json").read_text() and SECRET in (out / "steps.jsonl").read_text()
    done, text, members = _report(tmp_path, out)
    reproduction = text[text.index("### Reproduction"):text.index("### Bisect")]
    assert f"the bisect below replayed `{dump}` at each step" in reproduction
    for name, data in [*members.items(), ("body", text.encode()), ("stdout", done.stdout)]:
        assert SECRET.encode() not in data, name
    assert f"while loading with {MASK}" in members["bisect/result.json"].decode()
    assert f"while loading with {MASK}" in members["bisect/steps.jsonl"].decode()


def test_anonymize_replaces_the_host_a_crash_line_names_in_the_bisects_files(bisected, tmp_path):
    out, _, _, _ = bisected
    assert INTERNAL_HOST in (out / "result.json").read_text()
    done, text, members = _report(tmp_path, out, options=["--anonymize"])
    for name, data in [*members.items(), ("body", text.encode()), ("stdout", done.stdout)]:
        assert INTERNAL_HOST.encode() not in data and SECRET.encode() not in data, name
    for name in ("bisect/result.json", "bisect/steps.jsonl"):
        assert f"{MASK} from host-" in members[name].decode(), name  # replaced, not dropped


def test_a_hostile_subject_and_file_name_render_as_text(bisected, tmp_path):
    out, _, made, _ = bisected
    _, text, _ = _report(tmp_path, out)
    assert "\x1b" not in text
    html = _github_html(text)
    assert "<img" not in html and "<strong>wider" not in html and "<b>" not in html
    seen, linked, links = _github_sees(text, "li")
    assert links == [] and linked == []
    assert escape(SUBJECT) in seen and HOSTILE_FILE in seen


def test_the_step_table_is_shed_before_the_verdict(bisected, tmp_path, monkeypatch):
    """The body made by the real flow, rendered again under ever smaller limits: the step table
    goes first, saying so, while the first bad commit's lines stay."""
    out, _, made, _ = bisected
    made_facts = []
    render = body.render

    def kept(facts, limit=body.LIMIT):
        made_facts.append(facts)
        return render(facts, limit)

    monkeypatch.setattr(body, "render", kept)
    monkeypatch.setenv("WAREHOUSE_TOKEN", SECRET)
    make(ReportOptions(inputs=[str(out)], out=tmp_path))
    facts = made_facts[-1]
    full, cuts = render(facts)
    assert cuts == [] and "| verdict |" in full
    verdict = f"- First bad commit: `{made['crash']}`"
    shed_seen = False
    for limit in range(len(full) + body.MIN_TRIAGE, len(CUT_NOTE), -97):
        shown, cuts = render(facts, limit)
        assert len(shown) <= limit
        if "| verdict |" not in shown:
            assert cuts[0].startswith("the bisect's step table"), cuts
            assert "log findings" not in " ".join(cuts)  # no run: nothing of it to shed
            shed_seen = shed_seen or verdict in shown
        else:
            assert verdict in shown
    assert shed_seen


@pytest.mark.parametrize("damage, says", [
    ("garbage", "result.json: cannot be read (not a crashlab bisect result)"),
    ('{"schema_version": 1, "outcome": "found"}', "result.json: cannot be read (not a crashlab bisect result)"),
    (None, "holds a bisect's steps.jsonl but no result.json"),
])
def test_a_bisect_folder_whose_verdict_cannot_be_read_is_one_line_and_exit_2(bisected, tmp_path,
                                                                             damage, says):
    out, _, _, _ = bisected
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("*.server.runs"))
    if damage is None:
        (copy / "result.json").unlink()
    else:
        (copy / "result.json").write_text(damage)
    done = run_cli("report", copy, "--out", tmp_path / "issue")
    stderr = done.stderr.decode()
    assert done.returncode == 2 and says in stderr, stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not (tmp_path / "issue").exists() or not list((tmp_path / "issue").iterdir())
