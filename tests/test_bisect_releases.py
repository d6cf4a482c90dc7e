"""crashlab bisect --versions end to end on CPU: real wheels of a tiny package (tests/release_wheels.py,
the stand-in SGLang server failing as each version makes it) installed by real pip into the
environments bisect keeps per release, real serve processes and real HTTP on 127.0.0.1. One
version brings another crash (skipped, named), a later one the crash."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from crashlab.bisect.releases import COMPLETE
from tests.bisect_history import CRASH, FAST, OTHER, live_children
from tests.conftest import run_cli
from tests.release_wheels import install_template, wheel
from tests.replay_support import free_port, synthetic

#: what each version does on request 1000: nothing, another crash, or the crash
VERSIONS = {"1.0": None, "1.1": None, "1.2": OTHER, "1.3": None, "1.4": CRASH, "1.5": CRASH}


@pytest.fixture
def wheels(tmp_path):
    folder = tmp_path / "wheels"
    folder.mkdir()
    for version, crash in VERSIONS.items():
        wheel(folder, version, crash)
    return folder


def _bisect(tmp_path, wheels, versions, *extra, env=None):
    port = free_port()
    done = run_cli("bisect", "--versions", ",".join(versions), "--install", install_template(wheels),
                   "--base-python", sys.executable, "--releases-dir", str(tmp_path / "releases"),
                   "--dump", str(synthetic(tmp_path, 3)), "--url", f"http://127.0.0.1:{port}",
                   "--out", str(tmp_path / "out"), "--repeat", "1", *FAST, *extra, "--",
                   "{python}", "-m", "standin_app", "--port", str(port), "--starts",
                   str(tmp_path / "starts"), env=env, timeout=300)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def test_bisect_over_releases_finds_the_release_that_brought_the_crash(tmp_path, wheels):
    done = _bisect(tmp_path, wheels, VERSIONS, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    first_crash = next(version for version, crash in VERSIONS.items() if crash == CRASH)
    assert result["outcome"] == "found" and result["repo"] is None
    assert result["first_bad"]["kind"] == "release" and result["first_bad"]["version"] == first_crash
    assert (result["good"], result["bad"]) == (min(VERSIONS), max(VERSIONS))
    skipped = result["skips"]
    assert [step["revision"]["version"] for step in skipped] == ["1.2"] and OTHER in skipped[0]["reason"]
    releases = tmp_path / "releases"
    for step in result["steps"]:
        revision = step["revision"]
        # each release served from its own kept environment, installed as --install says
        assert revision["python"].startswith(str(releases)) and not revision["reused"]
        assert f"standin-app=={revision['version']}" in revision["install"]
        assert (releases / revision["python"]).parent.parent.joinpath(COMPLETE).is_file()
        expected = {None: "good", OTHER: "skip", CRASH: "bad"}[VERSIONS[revision["version"]]]
        assert step["verdict"] == expected, step
    # the base environment is untouched: no release went into it
    probe = subprocess.run([sys.executable, "-c", "import standin_app"], capture_output=True)
    assert probe.returncode != 0
    assert not live_children()

    # a second bisect reuses the environments: nothing installed
    again = _bisect(tmp_path, wheels, ["1.3", "1.4"], "--json", "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["first_bad"]["version"] == "1.4"
    assert all(step["revision"]["reused"] and step["build_s"] == 0 for step in second["steps"])
    assert not live_children()


def test_a_release_that_does_not_install_is_skipped_not_blamed(tmp_path, wheels):
    done = _bisect(tmp_path, wheels, ["1.0", "9.9", "1.4"], "--json")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "inconclusive"
    assert [c["version"] for c in result["candidates"]] == ["9.9", "1.4"]
    [skip] = result["skips"]
    assert skip["revision"]["version"] == "9.9" and "the install exited with code" in skip["reason"]
    # the failed environment is gone, so the next bisect tries it again
    assert not any(path.name.startswith("9.9-") for path in (tmp_path / "releases").iterdir())
    assert not live_children()


def test_a_release_hidden_by_pythonpath_is_refused(tmp_path, wheels):
    """An older copy of the package on PYTHONPATH would be what every step serves."""
    hidden = tmp_path / "hidden"
    with zipfile.ZipFile(wheels / "standin_app-1.0-py3-none-any.whl") as archive:
        archive.extractall(hidden)
    done = _bisect(tmp_path, wheels, ["1.3", "1.4"], env={"PYTHONPATH": str(hidden)})
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"would import standin_app from {hidden.resolve()}" in done.stderr
    assert not live_children()


@pytest.mark.parametrize("options, launch, says", [
    (["--versions", "1.0,1.4", "--good", "1.0"], ["{python}", "-m", "app"], "drop --good"),
    (["--versions", "1.0,1.4"], ["python3", "-m", "app"], "start the server with {python}"),
    (["--versions", "1.0;reboot,1.4"], ["{python}", "-m", "app"], "is not a version"),
    (["--versions", "1.0"], ["{python}", "-m", "app"], "at least two"),
    (["--good", "a", "--bad", "b"], ["{python}", "-m", "app"], "is for --versions"),
    (["--versions", "1.0,1.4", "--install", "pip install app"], ["{python}", "-m", "app"],
     "must name {version}"),
    (["--versions", "1.0,1.4", "--clear-cache", "~"], ["{python}", "-m", "app"], "--clear-cache"),
    (["--versions", "1.0,1.4", "--clear-cache", "/"], ["{python}", "-m", "app"], "--clear-cache"),
    (["--versions", "1.0,1.4", "--clear-cache", "{releases}"], ["{python}", "-m", "app"],
     "--clear-cache"),
    (["--versions", "1.0,1.4", "--base-python", "/no/such/python3"], ["{python}", "-m", "app"],
     "--base-python /no/such/python3"),
    (["--versions", "1.0,1.4", "--base-python", "/bin/true"], ["{python}", "-m", "app"],
     "not a Python interpreter"),
])
def test_bad_release_options_are_one_line_and_exit_2(tmp_path, options, launch, says):
    options = [word.replace("{releases}", str(tmp_path / "releases")) for word in options]
    done = run_cli("bisect", *options, "--dump", str(synthetic(tmp_path, 1)), "--releases-dir",
                   str(tmp_path / "releases"), "--", *launch)
    stderr = done.stderr.decode()
    assert done.returncode == 2 and says in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "releases").exists()
