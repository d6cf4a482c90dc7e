"""crashlab bisect end to end on CPU: a git repository built here around the stand-in SGLang
server (tests/sglang_server.py, real HTTP on 127.0.0.1, real processes), whose history has a
commit that brings the crash, one that brings another crash for a while (skipped, its signature
named, never blamed) and one that makes the crash flaky (it crashes every other start), so the
bad side's rate decides how many clean runs a good verdict takes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.bisect import stats
from crashlab.privacy.redact import MASK
from tests.bisect_history import (
    CRASH,
    FAST,
    HOSTILE,
    OTHER,
    SYNTAX_ERROR_LINE,
    broken,
    commit,
    commit_all,
    git,
    launch,
    live_children,
)
from tests.conftest import run_cli
from tests.replay_support import free_port, synthetic


@pytest.fixture
def history(tmp_path):
    """(repo, commits by role): good, other crash, its removal, the crash, flaky, later."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    made = {"good": commit(repo, "app: serve")}
    made["docs"] = commit(repo, "docs: a readme", touch="README")
    made["refactor"] = commit(repo, "refactor: names", touch="NAMES")
    made["other"] = commit(repo, "scheduler: an assert", crash=OTHER)
    made["other-gone"] = commit(repo, "scheduler: drop the assert")
    made["crash"] = commit(repo, HOSTILE, crash=CRASH)
    made["flaky"] = commit(repo, "scheduler: overlap", crash=CRASH, flaky=True)
    made["bad"] = commit(repo, "docs: the tile", crash=CRASH, flaky=True, touch="TILE")
    return repo, made


def _bisect(tmp_path, repo, good, bad, *extra, words=None, env=None):
    """crashlab bisect as a user runs it (--good and --bad left out where None); ``words(port)``
    the launch command, app.py's by default."""
    port = free_port()
    dump = synthetic(tmp_path, 3)
    words = words(port) if words else launch(repo, port, tmp_path / "starts")
    revisions = [*(["--good", good] if good else []), *(["--bad", bad] if bad else [])]
    done = run_cli("bisect", *revisions, "--repo", str(repo), "--dump",
                   str(dump), "--url", f"http://127.0.0.1:{port}", "--out",
                   str(tmp_path / "out"), *FAST, *extra, "--", *words, env=env, timeout=300)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def test_bisect_finds_the_commit_that_brought_the_crash(tmp_path, history):
    repo, made = history
    done = _bisect(tmp_path, repo, made["good"], "main", "--repeat", "4", "--json",
                   "--build", "python -m py_compile app.py", "--max-runs", "3")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "found"
    first = result["first_bad"]
    assert first["hash"] == made["crash"]
    assert first["subject"] == HOSTILE and first["files"] == ["app.py"]
    assert first["author_date"] == git(repo, "show", "-s", "--format=%aI", made["crash"])
    # the other crash is skipped, its signature named, never blamed
    skipped = {step["revision"]["hash"]: step for step in result["skips"]}
    assert made["other"] in skipped and OTHER in skipped[made["other"]]["reason"]
    assert all(step["verdict"] != "bad" for step in result["steps"]
               if step["revision"]["hash"] in (made["other"], made["other-gone"], made["good"]))
    # the flaky --bad side: every other start crashes; the lowest rate 2/4 allows sets the runs a
    # good verdict takes, more than --max-runs gives: each good step says how sure its 3 runs are
    endpoint = result["steps"][0]
    assert endpoint["role"] == "bad-endpoint" and len(endpoint["runs"]) == 4
    assert endpoint["reproduced"] == 2 and result["bad_rate"] == 0.5
    bound = stats.lower_bound(2, 4, 0.95)
    assert result["bad_rate_bound"] == round(bound, 4)
    assert stats.runs_for_good(2, 4, 0.95) > 3 and result["runs_for_good"] == 3
    reached = stats.confidence_reached(bound, 3)
    assert endpoint["reason"] == (f"reproduced 2/4: a rate of at least {bound:.2f} at 95% "
                                  "confidence; a good verdict takes 3 clean runs (--max-runs; "
                                  f"95% takes {stats.runs_for_good(2, 4, 0.95)})")
    for step in result["steps"]:
        if step["verdict"] == "good":
            assert len(step["runs"]) == result["runs_for_good"]
            assert step["confidence"] == round(reached, 4) < 0.95
            assert step["reason"].startswith(f"no crash in 3 runs: {reached:.1%} sure")
            assert all(run["time_to_failure_s"] is None for run in step["runs"])
    crashed = [run for step in result["steps"] for run in step["runs"]
               if run["verdict"] in ("reproduced", "different crash")]
    assert crashed and all(run["time_to_failure_s"] is not None for run in crashed)
    # the step log holds every step, the checkout is back on its branch, nothing outlives it
    logged = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    assert json.loads((Path(result["log"]).parent / "result.json").read_text()) == result
    assert [step["revision"]["hash"] for step in logged] == \
        [step["revision"]["hash"] for step in result["steps"]]
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not live_children()


def test_the_terminal_names_the_commit_and_the_skip(tmp_path, history):
    """A crash that reproduces in each of the 4 runs on --bad: 4/4 does not make its rate 1 (at
    95% confidence it is at least 0.05 ** (1/4) = 0.47), so a good verdict takes the clean runs
    that rate needs, not one run "100% sure"; the subject, from outside, prints as its text,
    neither markup nor a terminal escape."""
    repo, made = history
    done = _bisect(tmp_path, repo, made["refactor"], made["crash"], "--repeat", "4",
                   "--max-runs", "30")
    assert done.returncode == 0, done.stderr
    assert f"first bad commit: {made['crash']}" in done.stdout
    assert "kernel: a wider tile [red]x[/red] \\x1b[2J" in done.stdout
    assert "\x1b" not in done.stdout + done.stderr
    assert f"skipped {made['other'][:12]}" in done.stdout and OTHER in done.stdout
    bound = 0.05 ** (1 / 4)  # P(4 crashes in 4 runs) = 5% at this rate: Clopper-Pearson's bound
    needed = next(n for n in range(1, 100) if (1 - bound) ** n <= 0.05)
    assert needed > 1 and stats.runs_for_good(4, 4, 0.95) == needed
    assert (f"bad side reproduced at rate 1.00, at least {bound:.2f} at 95% confidence; a good "
            f"verdict took {needed} clean runs") in done.stdout
    sure = 1 - (1 - bound) ** needed
    goods = [line for line in done.stderr.splitlines() if line.startswith("good ")]
    assert goods and all(f"0/{needed}" in line and f"no crash in {needed} runs: {sure:.1%} sure"
                         in line for line in goods), done.stderr
    assert "100.0% sure" not in done.stderr
    assert not live_children()


def test_only_skipped_commits_between_is_inconclusive(tmp_path, history):
    """A side branch where the other crash comes right before the crash: no commit between can
    be judged, so the answer is the two candidates, exit 1."""
    repo, made = history
    git(repo, "checkout", "-q", "-b", "side", made["refactor"])
    other = commit(repo, "scheduler: an assert, again", crash=OTHER)
    crash = commit(repo, "kernel: the tile, with the assert gone", crash=CRASH)
    git(repo, "checkout", "-q", "main")
    done = _bisect(tmp_path, repo, made["refactor"], "side", "--json", "--repeat", "1")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "inconclusive" and result["first_bad"] is None
    assert [commit["hash"] for commit in result["candidates"]] == [other, crash]
    assert [step["revision"]["hash"] for step in result["skips"]] == [other]
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not live_children()


def _side_commit(repo, made, base, subject, crash):
    """A commit on a side branch from ``base`` (the work tree back on main after)."""
    git(repo, "checkout", "-q", "-b", "side", made[base])
    made["side"] = commit(repo, subject, crash=crash)
    git(repo, "checkout", "-q", "main")
    return "side"


@pytest.mark.parametrize("tried, verdict, code", [
    ("other-gone", "fixed", 0),      # drops the assert its parent crashes with
    ("bad", "not fixed", 1),         # its parent crashes every other start, and so does it
    ("side", "another crash", 1),    # its parent's crash is gone, an assert instead
])
def test_check_fix_tells_fixed_from_not_fixed(tmp_path, history, tried, verdict, code):
    repo, made = history
    if tried == "side":
        _side_commit(repo, made, "crash", "kernel: the tile, an assert instead", OTHER)
    parent = git(repo, "rev-parse", f"{made[tried]}^")
    done = _bisect(tmp_path, repo, None, None, "--check-fix", tried if tried == "side"
                   else made[tried], "--json", "--repeat", "4", "--max-runs", "5")
    assert done.returncode == code, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == verdict and result["fix"]["verdict"] == verdict
    assert result["fix"]["revision"]["hash"] == made[tried] and result["bad"] == parent
    steps = result["steps"]
    assert [step["revision"]["hash"] for step in steps] == [parent, made[tried]]
    assert steps[0]["verdict"] == "bad" and steps[0]["reproduced"] >= 1
    if verdict == "fixed":  # as many runs as the parent's k/N asks, within --max-runs 5
        assert len(steps[1]["runs"]) == result["runs_for_good"] == \
            min(stats.runs_for_good(steps[0]["reproduced"], len(steps[0]["runs"]), 0.95), 5)
    if verdict == "another crash":
        assert OTHER in steps[1]["reason"] and result["skips"] == [steps[1]]
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not live_children()


def test_check_fix_and_good_bad_contradict(tmp_path, history):
    repo, made = history
    done = _bisect(tmp_path, repo, made["good"], "main", "--check-fix", made["crash"])
    assert done.returncode == 2 and "--check-fix" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_dirty_work_tree_is_refused(tmp_path, history):
    repo, made = history
    (repo / "app.py").write_text("# edited\n")
    done = _bisect(tmp_path, repo, made["good"], "main")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "uncommitted changes" in done.stderr
    assert (repo / "app.py").read_text() == "# edited\n"


@pytest.mark.parametrize("good, bad, says", [
    ("no-such-rev", "main", "--good no-such-rev: no such commit"),
    ("main", "main", "nothing to bisect"),
])
def test_bad_revisions_are_one_line_and_exit_2(tmp_path, history, good, bad, says):
    repo, _ = history
    done = _bisect(tmp_path, repo, good, bad)
    assert done.returncode == 2 and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_clear_cache_empties_the_cache_before_every_step(tmp_path, history):
    """A JIT cache the build fills again at every step (as flashinfer's is filled by the server)
    is emptied before each one; what was in it before the bisect is gone too."""
    repo, made = history
    cache = tmp_path / "jit-cache"
    cache.mkdir()
    (cache / "from-before.so").write_text("stale")
    done = _bisect(tmp_path, repo, made["refactor"], made["crash"], "--repeat", "1", "--json",
                   "--clear-cache", str(cache), "--build", f"mkdir -p {cache} && touch {cache}/new.so")
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert len(steps) >= 3 and all(step["caches_cleared"] == [str(cache)] for step in steps)
    assert sorted(path.name for path in cache.iterdir()) == ["new.so"]


def _module_launch(tmp_path):
    """``python -m app``: app imported from wherever PYTHONPATH finds it."""
    return lambda port: [sys.executable, "-m", "app", "--port", str(port), "--starts",
                         str(tmp_path / "starts")]


def test_a_server_that_imports_another_copy_is_refused(tmp_path, history):
    """``python -m app`` finding app.py elsewhere on PYTHONPATH, not in the checkout: every step
    would serve the same code, so the bisect stops before its first replay."""
    repo, made = history
    elsewhere = tmp_path / "installed"
    elsewhere.mkdir()
    (elsewhere / "app.py").write_text((repo / "app.py").read_text())
    done = _bisect(tmp_path, repo, made["good"], "main", words=_module_launch(tmp_path),
                   env={"PYTHONPATH": str(elsewhere)})
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"would import app from {elsewhere.resolve() / 'app.py'}, not from the checkout" in done.stderr
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not (tmp_path / "out" / "step-01-" f"{made['bad'][:12]}.server.runs").exists()


def test_a_build_that_installs_the_checkout_elsewhere_is_trusted(tmp_path, history):
    """The same launch, with a --build that installs each checkout's app.py where the server
    imports it from (as ``pip install .`` does): the bisect runs and finds the crash."""
    repo, made = history
    installed = tmp_path / "installed"
    installed.mkdir()
    done = _bisect(tmp_path, repo, made["refactor"], made["crash"], "--repeat", "1", "--json",
                   "--build", f"cp app.py {installed}/app.py", words=_module_launch(tmp_path),
                   env={"PYTHONPATH": str(installed)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_bad"]["hash"] == made["crash"]


def test_a_secret_in_a_crash_line_is_masked_in_every_output(tmp_path, history):
    """A crash line that echoes a token the server's environment holds: the step lines, the
    verdict, --json and the step log show it masked."""
    repo, made = history
    secret = "hf_crashlabBisectSecret0123456789"
    _side_commit(repo, made, "refactor", "loader: log the token",
                 f"{CRASH} while loading with {secret}")
    done = _bisect(tmp_path, repo, made["refactor"], "side", "--repeat", "1", "--json",
                   env={"HF_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["first_bad"]["hash"] == made["side"]
    assert f"while loading with {MASK}" in result["steps"][0]["runs"][0]["signature"]
    log = Path(result["log"]).read_text()
    for text in (done.stdout, done.stderr, log):
        assert secret not in text


def test_the_same_signature_is_the_same_bug_when_the_message_changed(tmp_path, history):
    """The first bad commit raises the same exception from the same place as --bad, but its
    message names another request: replay's line pattern alone calls that another crash; serve's
    signature (messages left out) says it is the same bug, so the commit is blamed, not skipped."""
    repo, made = history
    git(repo, "checkout", "-q", "-b", "side", made["refactor"])
    first = commit(repo, "scheduler: look requests up by id",
                   crash="KeyError: 'request id req-alpha is not in the running batch'")
    commit(repo, "scheduler: rename", crash="KeyError: 'request id req-beta is not in the running batch'",
           touch="RENAME")
    git(repo, "checkout", "-q", "main")
    done = _bisect(tmp_path, repo, made["refactor"], "side", "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["first_bad"]["hash"] == first and not result["skips"]
    bad_run = result["steps"][0]["runs"][0]
    blamed_run = next(step for step in result["steps"] if step["revision"]["hash"] == first)["runs"][0]
    assert bad_run["signature_hash"] and blamed_run["signature_hash"] == bad_run["signature_hash"]
    assert "req-alpha" in blamed_run["signature"] and "req-beta" in bad_run["signature"]
    assert f"signature {bad_run['signature_hash']}" in result["expected"]


def test_tracked_files_a_build_changed_are_kept_never_discarded(tmp_path, history):
    """A --build that edits a tracked file: the next checkout would overwrite the edit, so the
    bisect stops after the first step with one line (exit 2) and the edit is still there."""
    repo, made = history
    done = _bisect(tmp_path, repo, made["docs"], "main", "--repeat", "2",
                   "--build", "echo built >> README")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()  # the step's line, folded where it is long
    first_step, problem = lines[0], lines[-1]
    assert first_step.split()[1] == made["bad"][:12]
    assert problem.startswith("crashlab: ") and "tracked files changed during the bisect (README" in problem
    assert (repo / "README").read_text().endswith("built\n")


def test_a_checkout_left_changed_by_the_last_build_stays_and_says_so(tmp_path, history):
    """The last step's build edits a tracked file: the verdict stands, the checkout stays at that
    step with the edit kept, and a note says so instead of a silent reset."""
    repo, made = history
    done = _bisect(tmp_path, repo, None, None, "--check-fix", made["bad"], "--repeat", "2",
                   "--json", "--build", "if [ -f TILE ]; then echo built >> README; fi",
                   "--max-runs", "5")  # the fix crashes every other start: more than one run
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "not fixed"
    [note] = result["notes"]
    assert note.startswith(f"the checkout stays at {made['bad']}, not main")
    assert git(repo, "rev-parse", "HEAD") == made["bad"]
    assert (repo / "README").read_text().endswith("built\n")


def test_an_earlier_bisect_in_out_is_never_overwritten(tmp_path, history):
    repo, made = history
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text('{"outcome": "found"}\n')
    done = _bisect(tmp_path, repo, made["good"], "main")
    assert done.returncode == 2 and "holds an earlier bisect (result.json)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert (out / "result.json").read_text() == '{"outcome": "found"}\n'
    assert sorted(path.name for path in out.iterdir()) == ["result.json"]


def test_a_commit_whose_server_does_not_start_is_skipped(tmp_path, history):
    """A commit in the middle whose server raises SyntaxError as it starts (half a refactor)
    cannot be judged: it is skipped and stepped around, never blamed, with the server's own
    failure as serve caught and signed it (the exception line, how the server ended, serve's
    signature), not serve's exit code under an option bisect does not have. The same server not
    starting on --bad, the first step, means the launch itself is wrong: exit 3, in the server's
    own words too."""
    repo, made = history
    git(repo, "checkout", "-q", "-b", "side", made["refactor"])
    broken_commit = broken(repo, "app: half a refactor")
    commit(repo, "app: the refactor finished")
    crash = commit(repo, "kernel: the tile", crash=CRASH)
    git(repo, "checkout", "-q", "main")
    done = _bisect(tmp_path, repo, made["refactor"], "side", "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["first_bad"]["hash"] == crash
    [skip] = result["skips"]
    assert skip["revision"]["hash"] == broken_commit and skip["runs"] == []
    # serve's report of that server: the reason names its crash as serve signed it
    [report] = (tmp_path / "out").glob(f"step-*-{broken_commit[:12]}.server.runs/run-01/*/report.json")
    signed = json.loads(report.read_text())
    [incident] = signed["incidents"]
    assert incident["exit"]["code"] == 1
    assert skip["reason"] == (f"the server did not start: {SYNTAX_ERROR_LINE} | "
                              f"{incident['summary']} (signature {incident['signature']['hash']}, "
                              f"serve's report: {report.with_suffix('.md')})")
    assert "--restart-cmd" not in done.stdout + done.stderr
    assert "code 0" not in skip["reason"]
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"

    # on --bad: a server that says why it stops (SystemExit's message) and exits 1
    git(repo, "checkout", "-q", "-b", "exits", made["refactor"])
    (repo / "app.py").write_text('raise SystemExit("app: no model path given")\n')
    exits = commit_all(repo, "app: needs a model")
    git(repo, "checkout", "-q", "main")
    refused = _bisect(tmp_path / "again", repo, made["refactor"], exits, "--repeat", "1")
    assert refused.returncode == 3, refused.stderr
    [line] = refused.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"crashlab: the server did not start on --bad {exits[:12]}: "
                           "app: no model path given | server exited with code 1 (signature "), line
    assert "--restart-cmd" not in refused.stderr
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not live_children()
