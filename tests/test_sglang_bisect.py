"""``crashlab bisect`` on the REAL SGLang 0.5.23 server: SGLang's own python sources in a git
repository whose (synthetic, tests/real_sglang/history.py) history plants a regression, bisected
against the real crash dump the serve tests collected, cut to its one request that raises. Each
step is a fresh real server importing sglang from the checkout, so the found commit can only be
the one that removed the planted bounds check.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

import crashlab.replay as replay
from crashlab.bisect import stats
from crashlab.replay.writer import write_subset
from tests.bisect_history import git, live_children
from tests.conftest import free_port, run_cli
from tests.real_sglang import history, server

#: its servers apart from the other real-server modules' (tests/conftest.py), on a worker of their
#: own: the bisect's four server starts would make that tier the suite's critical path
pytestmark = [pytest.mark.sglang, pytest.mark.xdist_group("sglang-bisect")]

#: Four steps of one server start each, on a loaded 2-core machine.
BISECT_TIMEOUT = 1800


@pytest.fixture
def reproducer(sglang_crash, sglang_env, tmp_path) -> Path:
    """The real dump cut to the request that raises, written by crashlab's own writer (what
    replay --minimize -o writes): one request keeps every step's replay short."""
    dump = replay.load(sglang_crash("exception").request_dump)
    [culprit] = [r for r in dump.requests if r.text == server.crash_body(sglang_env)["text"]]
    path = tmp_path / "crash.min.pkl"
    write_subset(dump, [culprit], path)
    assert [r.rid for r in replay.load(path).requests] == [culprit.rid]
    return path


def _holding(pythonpath: Path) -> list[psutil.Process]:
    """Live processes started with this PYTHONPATH: the servers of the bisect's steps and their
    children (orphans too, which a look at the test's own children would miss)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("PYTHONPATH") == str(pythonpath) and \
                    process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="module")
def sglang_repo(sglang_env, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(repo, commits by role): one repository for the module (copying and committing SGLang's
    sources costs seconds): a bisect leaves it on its branch, clean, as the first test asserts,
    and the refused one never moves it."""
    repo = tmp_path_factory.mktemp("sglang-history") / "sglang"
    return repo, history.build(sglang_env, repo)


def _bisect(sglang_env, repo, made, reproducer, out, environment):
    """crashlab bisect from the planted good commit to main, as a user runs it, the real
    server's launch after --; one run on the bad side (the crash reproduces every time) and one
    clean run a good verdict (1/1 bounds the rate too loosely for 95% within --max-runs' 30)."""
    port = free_port()
    return run_cli("bisect", "--good", made["good"], "--bad", "main", "--repo", repo,
                   "--dump", reproducer, "--url", server.url(port), "--repeat", "1",
                   "--max-runs", "1", "--start-timeout", server.START_TIMEOUT, "--out", out, "--json", "--",
                   *server.launch_args(sglang_env, port),
                   env={**server.ENVIRONMENT, **environment}, timeout=BISECT_TIMEOUT)


def test_bisect_finds_the_planted_regression_on_the_real_server(sglang_env, sglang_repo,
                                                                 reproducer, tmp_path):
    repo, made = sglang_repo
    order = list(made.values())
    out = tmp_path / "out"
    done = _bisect(sglang_env, repo, made, reproducer, out, {"PYTHONPATH": str(repo / "python")})
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    result = json.loads(done.stdout)
    assert result["outcome"] == "found", result["why"]
    first = result["first_bad"]
    assert first["kind"] == "commit" and first["hash"] == made["regression"]
    assert first["subject"] == history.REGRESSION and first["files"] == [str(history.PROCESSOR)]
    assert first["author_date"] == git(repo, "show", "-s", "--format=%aI", made["regression"])
    assert "IndexError" in result["expected"], result["expected"]
    # every step's verdict is the history's: bad from the regression on, good before it
    steps = result["steps"]
    for step in steps:
        at = order.index(step["revision"]["hash"])
        assert step["verdict"] == ("bad" if at >= order.index(made["regression"]) else "good"), step
    assert not result["skips"]
    endpoint, clean = steps[0], steps[1]
    assert (endpoint["role"], endpoint["revision"]["hash"]) == ("bad-endpoint", made["head"])
    assert (endpoint["reproduced"], len(endpoint["runs"])) == (1, 1) and result["bad_rate"] == 1.0
    # 1/1 allows a rate as low as 0.05 at 95%: that would take 59 clean runs, --max-runs gives 1
    bound = stats.lower_bound(1, 1, result["confidence"])
    assert result["bad_rate_bound"] == round(bound, 4)
    assert result["runs_for_good"] == min(stats.runs_for_good(1, 1, result["confidence"]), 1)
    assert (clean["role"], clean["revision"]["hash"]) == ("good-endpoint", made["good"])
    assert len(clean["runs"]) == result["runs_for_good"]
    assert clean["confidence"] == round(stats.confidence_reached(bound, len(clean["runs"])), 4)
    # the regression's parent was served and judged good: nothing but the verdicts placed it
    judged = {step["revision"]["hash"]: step["verdict"] for step in steps}
    assert judged.get(git(repo, "rev-parse", f"{made['regression']}^")) == "good", judged
    # the bad steps' servers raised in the checkout's processor, not in the installed package's
    for step in steps:
        if step["verdict"] == "bad":
            [log] = out.glob(f"step-*-{step['revision']['hash'][:12]}.server.log")
            text = log.read_text(errors="replace")
            assert f'File "{repo / history.PROCESSOR}"' in text, log
            assert str(history.installed_package(sglang_env)) not in text, log
    # the checkout is back on its branch and clean; no server of any step outlives the bisect
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(repo, "status", "--porcelain") == ""
    assert not _holding(repo / "python")
    assert not live_children()


def test_without_the_checkout_on_the_path_no_server_is_started(sglang_env, sglang_repo,
                                                                reproducer, tmp_path):
    """The real environment's Python imports its installed sglang when PYTHONPATH does not name
    the checkout: every step would serve the same code, so bisect refuses before any start."""
    repo, made = sglang_repo
    out = tmp_path / "out"
    done = _bisect(sglang_env, repo, made, reproducer, out, {})
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 2, stderr
    assert len(stderr.strip().splitlines()) == 1
    assert str(history.installed_package(sglang_env)) in stderr and str(repo) in stderr
    assert not list(out.glob("step-*.server.*"))
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
