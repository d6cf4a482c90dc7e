"""The suite's own scheduling: under README's `--dist loadgroup` (here on 2 workers) the tests
of one `xdist_group` (the real-SGLang tier) run on one worker. pytest 9.2 with pytest-xdist 3.8 silently
stopped grouping, and the tier then started its servers on both workers at once."""

from __future__ import annotations

import re
import subprocess
import sys

GROUPED = '''
import os, pytest
pytestmark = [pytest.mark.xdist_group("tier")]
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    print(os.environ["PYTEST_XDIST_WORKER"])
'''
LOOSE = '''
import pytest
@pytest.mark.parametrize("i", range(6))
def test_loose(i):
    pass
'''


def test_one_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = set(re.findall(r"\[(gw\d)\] .*PASSED .*test_grouped", done.stdout))
    assert len(workers) == 1, done.stdout
