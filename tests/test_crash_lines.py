"""One list of crash lines (crashlab.logpatterns): every consumer classifies each line of the real
logs alike. Serve's log scanner (its findings, of a kind), the signature rules (reading a
finding back as its kind), replay's and bisect's crash oracles (built as their command lines
build them, fed the log a line at a time as a server writes it) and serve's incarnation (SGLang's
crash path has begun) are run on every line of fixtures/logs (the real SGLang 0.5.23 servers'
stderr, and the shared samples' traceback) and of the H200 programs' outputs
(fixtures/gpu/h200: the driver's coredump lines, PyTorch's CUDA errors, device-side asserts).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from crashlab.cli import main
from crashlab.logpatterns import PATTERNS, CrashLine, crash_line
from crashlab.replay.oracle import Oracle
from crashlab.signature.logs import _said
from crashlab.supervise.incarnation import LiveIncarnation
from crashlab.supervise.logscan import StreamScanner
from crashlab.vocabulary import SGLANG_CRASH, TRACEBACK
from tests.conftest import ROOT

LOGS = sorted((ROOT / "fixtures" / "logs").glob("*.log")) + \
    sorted((ROOT / "fixtures" / "gpu" / "h200").glob("*/*std*.txt"))
NONE = CrashLine("", "", ())
DUMP = ROOT / "fixtures" / "sglang_dumps" / "real" / "crash_dump_real_0.5.23.pkl"


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT / "fixtures"))


def _serve(data: bytes) -> dict[int, str]:
    """Serve's findings (not its tracebacks, which are assembled, not matched): line -> kind."""
    found: list = []
    scanner = StreamScanner("stderr", found.append)
    scanner.feed(data)
    scanner.close()
    return {finding.line: finding.kind for finding in found if finding.kind != TRACEBACK}


def _oracle(verb: str, args: list[str], log: Path):
    """The crash oracle of VERB's options as its command line makes them, watching LOG."""
    from crashlab.bisect.options import BisectOptions
    from crashlab.replay.options import ReplayOptions

    made = {"replay": ReplayOptions, "bisect": BisectOptions}[verb]
    options = made.from_command_line(**main.commands[verb].make_context(verb, args).params)
    return Oracle("http://127.0.0.1:9", options.watch, server_log=log)


def _judged(oracle, lines: list[bytes], log: Path) -> set[int]:
    """The lines the oracle calls fault lines, each appended to the log as a server writes it."""
    faults = set()
    for number, raw in enumerate(lines, 1):
        with open(log, "ab") as stream:
            stream.write(raw + b"\n")
        if oracle.log.matches():
            faults.add(number)
    return faults


def _sglang_crashing(text: str) -> bool:
    """Whether serve's incarnation takes the line for SGLang's crash path having begun."""
    state = SimpleNamespace(sglang_crashing=False, reported_exits={}, mentioned_request_dumps=[])
    LiveIncarnation._observe_sglang_crash(state, text)  # type: ignore[arg-type]
    return state.sglang_crashing


@pytest.mark.parametrize("path", LOGS, ids=_name)
def test_every_consumer_classifies_each_line_alike(path, tmp_path):
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    texts = [raw.decode("utf-8", "replace").rstrip("\r") for raw in lines]
    serve = _serve(data)
    oracles = {
        "replay": _oracle("replay", [str(DUMP), "--url", "http://127.0.0.1:9"], tmp_path / "replay.log"),
        "bisect": _oracle("bisect", ["--repo", str(tmp_path), "--good", "a", "--bad", "b",
                                     "--dump", str(DUMP), "--out", str(tmp_path / "bisect"), "--",
                                     "python", "-m", "sglang.launch_server"], tmp_path / "bisect.log")}
    for verb, oracle in oracles.items():
        judged = _judged(oracle, lines, tmp_path / f"{verb}.log")
        assert judged == set(serve), (verb, {n: texts[n - 1] for n in judged ^ set(serve)})
    for number, kind in serve.items():  # the signature rules read each finding as its kind
        assert _said(kind, texts[number - 1]) in texts[number - 1]
    crashing = {n for n, text in enumerate(texts, 1) if _sglang_crashing(text)}
    assert crashing <= {n for n, kind in serve.items() if kind == SGLANG_CRASH}, \
        {n: texts[n - 1] for n in crashing}


def test_the_fixtures_hold_crash_lines_of_many_kinds():
    """The test above is over lines of most kinds: no entry of the list goes untried for want
    of a line, bar those no real log here shows (NCCL, Xid, OOM, compute-sanitizer)."""
    kinds, crash_path, milestones = set(), 0, 0
    for path in LOGS:
        data = path.read_bytes()
        serve = _serve(data)
        kinds |= set(serve.values())
        texts = data.decode("utf-8", "replace").split("\n")
        crash_path += sum(_sglang_crashing(text) for text in texts)
        # the coredump lines serve's incarnation records (the rest it only tracks) are findings
        marked = {n for n, text in enumerate(texts, 1) if (crash_line(text) or NONE).milestone}
        assert marked <= {n for n, kind in serve.items() if kind == "coredump"}, path
        milestones += len(marked)
    assert kinds >= {"cuda-error", "coredump", "scheduler-exception", "sglang-crash", "fatal"}
    assert crash_path >= 3 and milestones >= 10
    assert {line.kind for line in PATTERNS} - kinds == {"nccl-timeout", "xid", "oom"}
