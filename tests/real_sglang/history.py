"""A git repository of REAL SGLang 0.5.23 python sources (the package the real environment
installed, copied as it is) with a PLANTED regression, for ``crashlab bisect`` on the real server.

The history is SYNTHETIC, made here: the first commit is the release with a bounds check planted
in SGLang's DisallowedTokensLogitsProcessor (token ids past the vocabulary are dropped, so the
request that disallows token 5000 of the model's 1000 runs clean); a later commit removes it,
which is the released code, and the request raises IndexError in the scheduler again. The other
commits touch documentation only. The server imports sglang from the checkout (PYTHONPATH), so
that one line is the whole difference between a good step and a bad one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.bisect_history import commit_all, git

#: The processor's file in the repository (SGLang's own layout: the package under python/).
PROCESSOR = Path("python") / "sglang" / "srt" / "sampling" / "custom_logit_processor.py"
#: The released line that raises for a token id past the logits' last column.
RELEASED = '        logits[..., disallowed_token_ids] = -float("inf")\n'
#: The planted check, put before it in the good commit.
CHECK = ("        # token ids past the vocabulary name no logit: drop them\n"
         "        disallowed_token_ids = [t for t in disallowed_token_ids if t < logits.shape[-1]]\n")
REGRESSION = "sampling: index the disallowed tokens' logits directly"


def installed_package(sglang_env: Path) -> Path:
    """The sglang package the real environment's Python imports when nothing comes first."""
    [package] = sglang_env.glob("lib/python3*/site-packages/sglang")
    return package


def _docs(repo: Path, name: str, subject: str) -> str:
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs" / name).write_text(subject + "\n")
    return commit_all(repo, subject)


def build(sglang_env: Path, repo: Path) -> dict[str, str]:
    """The repository at ``repo`` on branch main; its commits' hashes by role, oldest first:
    good, docs, regression, later, head."""
    shutil.copytree(installed_package(sglang_env), repo / "python" / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ".gitignore").write_text("__pycache__/\n")
    processor = repo / PROCESSOR
    released = processor.read_text()
    assert released.count(RELEASED) == 1, f"{PROCESSOR}: the line to plant a check before moved"
    processor.write_text(released.replace(RELEASED, CHECK + RELEASED))
    git(repo, "init", "-q", "-b", "main")
    made = {"good": commit_all(repo, "sglang 0.5.23, disallowed token ids bounded by the vocabulary")}
    made["docs"] = _docs(repo, "sampling.md", "docs: custom logit processors")
    processor.write_text(released)
    made["regression"] = commit_all(repo, REGRESSION)
    made["later"] = _docs(repo, "cpu.md", "docs: serving on CPU")
    made["head"] = _docs(repo, "bisect.md", "docs: bisecting a crash")
    return made
