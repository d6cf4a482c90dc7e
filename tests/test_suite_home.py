"""The suite runs as on a fresh machine: HOME is an empty folder of this pytest run
(tests/conftest.py), so a test that reads a file of the machine's own home fails on every
machine, not first on a fresh clone; what it may reach outside the clone is declared there."""

from __future__ import annotations

import os
from pathlib import Path


def test_home_is_a_folder_of_this_run_and_the_sglang_cache_is_declared(tmp_path_factory):
    home = Path.home()
    assert str(home) == os.environ["HOME"]
    assert home.is_relative_to(tmp_path_factory.getbasetemp()), home
    assert not Path(os.environ["CRASHLAB_SGLANG_CACHE"]).is_relative_to(home)
