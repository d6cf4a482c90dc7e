"""What could go into the bundle, each cleaned, named and ranked by how much a maintainer needs it.

Text members (the run's reports, each coredump's triage, the environment, log excerpts) are
made here from the run directory, redacted (and anonymized) like the body. A request dump is
rewritten with its secrets masked (crashlab.replay.scrub). A coredump is binary and cannot be
rewritten: it goes in as it is, unless it holds a secret the report knows of (or, anonymized, a
known host or user name, a home folder, a private host name, an IP address, or GPU memory,
where prompts live), which leaves it out.

A bisect's verdict (result.json) and step log (steps.jsonl) are made here too, each JSON value
cleaned like the run's reports.

A hang capture gives its reading (``hang/reading.json``, the capture named by its place in the
bundle) and the capture's own files under ``hang/capture/``, each by its path inside the
capture, never one of the reporting machine's: capture.json, py-spy's stacks, NCCL RAS's
replies, NVML's samples and JSON Flight Recorder dumps cleaned as text; a pickled Flight
Recorder dump is binary and goes in as it is unless it holds what a coredump would be refused
for. A path capture.json names outside its folder is never opened. The capture's GPU dumps go
in (``hang/gpu-dumps/``, as coredumps, with a coredump's refusals) only with --gpu-dumps:
they are large and may hold GPU memory.

Ranks, most needed first: the triage, the environment, a bisect's verdict and a hang's reading;
the logs, the run's records, a bisect's step log and a hang capture's text files; the minimized
reproducer and a capture's pickled Flight Recorder dumps; the request dumps; the FAULT
coredumps; the other coredumps and a capture's GPU dumps. Within a rank the smaller goes first, so that the largest and
least useful are what a budget leaves out.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..bisect.model import RESULT, STEP_LOG
from ..coredump.constants import GZIP_MAGIC
from ..env.capture import is_reported_variable
from ..errors import BadInput
from ..hangs.model import HangReading
from ..privacy.anonymize import BYTES_REACH, place_or_person_in
from ..privacy.policy import Privacy
from ..privacy.redact import MASK
from ..report.model import TriageReport
from ..supervise import rundir
from ..supervise.incident import lines_at_ends
from ..wrongverb import advised
from .inputs import BisectInput, CoreInput, DumpInput, HangInput, Inputs, RunInput
from .model import MemberKind

#: Lines of each log kept from its start (the launch, the server's arguments) and its end.
LOG_HEAD, LOG_TAIL = 200, 2000
#: A line is kept to this many characters, once cleaned: cut first, a secret or a host name
#: across the cut would be left half, which no rule and no known value matches.
LOG_LINE_CHARS = 4000
#: Bytes of a line read to clean: what a cleaned line of LOG_LINE_CHARS can come from, with
#: room for the masks and placeholders that shorten or lengthen it.
LOG_LINE_READ = 4 * LOG_LINE_CHARS
_SCAN_CHUNK = 1 << 20


@dataclass
class Candidate:
    name: str
    kind: MemberKind
    rank: int
    source: Path
    content: bytes | Path | None
    #: why it cannot go in at all, whatever the budget
    refused: str | None = None

    @property
    def size(self) -> int:
        if isinstance(self.content, bytes):
            return len(self.content)
        return self.source.stat().st_size if self.source.is_file() else 0


def _unique(name: str, taken: set[str]) -> str:
    stem, dot, suffix = name.partition(".")
    found, number = name, 1
    while found in taken:
        number += 1
        found = f"{stem}-{number}{dot}{suffix}"
    taken.add(found)
    return found


def log_excerpt(path: Path, privacy: Privacy, label: str) -> bytes:
    """A log's first LOG_HEAD and last LOG_TAIL lines, cleaned, with a line saying what is cut."""
    total, head, tail = lines_at_ends(path, LOG_HEAD, LOG_TAIL, keep=LOG_LINE_READ)

    def cleaned(raw: bytes) -> str:
        return privacy.text(raw.decode("utf-8", "replace"))[:LOG_LINE_CHARS]

    note = "anonymized" if privacy.anonymized else "secrets masked"
    lines = [f"# crashlab report: {label}, {total} lines, {note}"]
    lines += [cleaned(raw) for raw in head]
    skipped = total - len(head) - len(tail)
    if skipped:
        lines.append(f"# [... {skipped} lines left out: lines {len(head) + 1}-{len(head) + skipped} ...]")
    lines += [cleaned(raw) for raw in tail]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def _json_file(path: Path) -> object | None:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _launch_shown(launch: object) -> object:
    """launch.json as the bundle holds it: the values of the variables crashlab env reports (the
    CUDA, NCCL, torch and server families), and only the names of the others. A server's whole
    environment holds credentials whose names say nothing (``MY_SERVICE_LOGIN``), which no rule
    can tell from a setting."""
    if not isinstance(launch, dict) or not isinstance(launch.get("environment"), dict):
        return launch
    return {**launch, "environment": {
        name: value if is_reported_variable(str(name)) or value in ("", None) else MASK
        for name, value in launch["environment"].items()}}


def _run_members(run: RunInput, privacy: Privacy, prefix: str) -> Iterable[Candidate]:
    if run.report is not None:
        yield Candidate(f"{prefix}report.json", "run", 0, run.path / "report.json",
                        privacy.document(run.report.model_dump(mode="json")))
    yield Candidate(f"{prefix}manifest.json", "run", 1, run.path / "manifest.json",
                    privacy.document(run.manifest.model_dump(mode="json")))
    for incarnation in run.manifest.incarnations:
        folder = rundir.incarnation(run.path, incarnation.number)
        at = f"{prefix}incarnation-{incarnation.number}/"
        for path, shown in ((folder.launch, _launch_shown), (folder.server_info, None)):
            value = _json_file(path)
            if value is not None:
                yield Candidate(at + path.name, "run", 1, path,
                                privacy.document(shown(value) if shown else value))
        for stream in ("stderr", "stdout"):
            path = folder.log(stream)
            if path.is_file() and path.stat().st_size:
                yield Candidate(f"{at}{stream}.log", "log", 1, path,
                                log_excerpt(path, privacy, f"{stream}.log of incarnation {incarnation.number}"))
    yield from _sglang_members(run, privacy, prefix)


def _sglang_members(run: RunInput, privacy: Privacy, prefix: str) -> Iterable[Candidate]:
    """The files SGLang itself wrote that serve kept: its kernel-API logs, an excerpt cleaned like
    every log; its crash snapshots, each JSON value cleaned like the run's reports."""
    for record in run.manifest.files:
        path = run.path / record.path
        if not path.is_file():
            continue
        if record.kind == "kernel-api-log":
            yield Candidate(prefix + record.path, "log", 1, path,
                            log_excerpt(path, privacy, f"SGLang's kernel-API log {record.path}"))
        elif record.kind == "crash-snapshot":
            value = _json_file(path)
            content = privacy.document(value) if value is not None else log_excerpt(path, privacy, f"SGLang's crash snapshot {record.path} (not JSON)")
            yield Candidate(prefix + record.path, "run", 1, path, content)


def bisect_folder(inputs: Inputs, number: int) -> str:
    """The bundle's folder of the bisect ``number`` (from 0): ``bisect/``, or ``bisect-N/`` when
    several were given, as runs are named."""
    return "bisect/" if len(inputs.bisects) == 1 else f"bisect-{number + 1}/"


def _json_lines(path: Path, privacy: Privacy) -> bytes:
    """A JSON-lines file, each line's value cleaned; a line that is not JSON cleaned as text."""
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            lines.append(json.dumps(privacy.json(json.loads(line))))
        except ValueError:
            lines.append(privacy.text(line))
    return privacy.redactor.serialized("".join(f"{line}\n" for line in lines)).encode()


def _bisect_members(bisect: BisectInput, privacy: Privacy, prefix: str) -> Iterable[Candidate]:
    yield Candidate(prefix + RESULT, "bisect", 0, bisect.path / RESULT,
                    privacy.document(bisect.result.model_dump(mode="json")))
    log = bisect.step_log
    if log is not None:
        try:
            yield Candidate(prefix + STEP_LOG, "bisect", 1, log, _json_lines(log, privacy))
        except OSError as problem:
            yield Candidate(prefix + STEP_LOG, "bisect", 1, log, None,
                            refused=f"it cannot be read ({problem.strerror or problem})")


def _first_found(path: Path, find: Callable[[bytes], str | None], overlap: int) -> str | None:
    """What ``find`` names first in the file (gunzipped, if gzip), read in chunks that overlap by
    ``overlap`` bytes, so that a core of gigabytes never is in memory at once."""
    with open(path, "rb") as raw:
        compressed = raw.read(2) == GZIP_MAGIC
    opener = gzip.open if compressed else open
    with opener(path, "rb") as stream:
        tail = b""
        while chunk := stream.read(_SCAN_CHUNK):
            window = tail + chunk
            found = find(window)
            if found:
                return found
            tail = window[-overlap:] if overlap else b""
    return None


def _needle_finder(needles: list[bytes]) -> Callable[[bytes], str | None]:
    def find(window: bytes) -> str | None:
        return "known" if any(needle in window for needle in needles) else None
    return find


def _global_memory(dump) -> bool:
    """Whether a dump may hold global memory: it has memory and its flags do not say it was
    skipped (a lightweight dump keeps kernel parameters and little else)."""
    return dump.memory_bytes > 0 and "skip_global_memory" not in dump.generation_flags


def _strings(value, change: Callable[[str], str]):
    """A JSON value with ``change`` applied to each of its strings (keys left as they are)."""
    if isinstance(value, dict):
        return {key: _strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_strings(item, change) for item in value]
    return change(value) if isinstance(value, str) else value


def bundled(report: TriageReport, path: Path, member: str) -> TriageReport:
    """A coredump's triage as the issue shows it: the dump named as the bundle holds it
    (``cores/NAME``) wherever the triage names the file on the reporting machine (its source,
    the debugger's ``target cudacore PATH`` and what cuda-gdb printed of it), and the debugger
    by its file name, not where it lies on that machine. What the user typed stays in
    report.json's inputs; the crash needs none of the reporting machine's folders."""
    value = report.model_dump(mode="json")
    names = {str(path), os.path.abspath(path), str(path.resolve()), report.source.path}
    tool = (report.debugger.tool if report.debugger is not None else None) or ""
    shown = {name: member for name in names if name and name != "-"}
    if os.sep in tool:
        shown[tool] = Path(tool).name
    if shown:
        found = re.compile(r"(?<![\w./-])(?:" + "|".join(
            re.escape(name) for name in sorted(shown, key=len, reverse=True)) + r")(?![\w/-])")
        value = _strings(value, lambda text: found.sub(lambda m: shown[m.group()], text))
    return TriageReport.model_validate(value)


def _core_refusal(core: CoreInput, privacy: Privacy) -> str | None:
    if privacy.anonymizer is not None and core.report is not None and _global_memory(core.report.dump):
        return "it holds GPU global memory, where request data lives, and --anonymize was asked for"
    return _binary_refusal(core.path, privacy, "a coredump")


def _binary_refusal(path: Path, privacy: Privacy, what: str) -> str | None:
    """Why a file that cannot be rewritten (a coredump, a pickle) stays out: it holds a secret
    or (anonymized) a name crashlab knows of, or a place or person --anonymize replaces in
    text; None where it may go in as it is."""
    needles = [secret.encode() for secret in privacy.redactor.known]
    if privacy.anonymizer is not None:
        needles += [name.encode() for name in privacy.anonymizer.names]
    try:
        if needles and _first_found(path, _needle_finder(needles), max(map(len, needles)) - 1):
            return (f"it holds a secret, host or user name crashlab knows of, and {what} "
                    "cannot be rewritten")
        if privacy.anonymizer is not None:
            found = _first_found(path, place_or_person_in, BYTES_REACH)
            if found:
                return (f"it holds {found}, which --anonymize replaces in text, and {what} "
                        "cannot be rewritten")
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as problem:
        return f"it cannot be read ({problem})"
    return None


def _core_rank(core: CoreInput) -> int:
    if core.label == "FAULT" or (core.label is None and core.report is not None and core.report.found):
        return 4
    return 6 if core.report is None else 5


def _unloadable(why: str | None) -> str:
    return f"crashlab's loader refuses it, so it cannot be cleaned ({why})"


def _dump_members(dump: DumpInput, privacy: Privacy, name: str) -> Iterable[Candidate]:
    from ..picklesafe.writer import dumps
    from ..replay.loader import load
    from ..replay.scrub import scrub
    from ..replay.writer import portable

    def rewritten(loaded) -> bytes:
        return dumps(portable(scrub(loaded, privacy.text, privacy.anonymized)))

    if dump.dump is None:
        yield Candidate(name, "request-dump", 3, dump.path, None, refused=_unloadable(dump.error))
        return
    yield Candidate(name, "request-dump", 3, dump.path, rewritten(dump.dump))
    if dump.minimized is not None:
        minimized = name.removesuffix(".pkl") + ".min.pkl"
        try:
            content, refused = rewritten(load(dump.minimized)), None
        except BadInput as problem:
            content, refused = None, _unloadable(advised(problem))
        yield Candidate(minimized, "request-dump", 2, dump.minimized, content, refused=refused)


def hang_folder(inputs: Inputs, number: int) -> str:
    """The bundle's folder of the hang ``number`` (from 0): ``hang/``, or ``hang-N/`` when
    several were given."""
    return "hang/" if len(inputs.hangs) == 1 else f"hang-{number + 1}/"


#: Bytes of a capture's file read: what its writer caps every file at is far below this.
CAPTURE_FILE_LIMIT = 256 << 20


def _capture_file(folder: Path, relative: str, privacy: Privacy, name: str) -> Candidate:
    """One file capture.json names, cleaned where it is text; refused where it leaves the
    capture or cannot be read."""
    from ..hangs.files import Unreadable, read_within, resolved_within

    try:
        path = resolved_within(folder, relative)
        data = read_within(folder, relative, CAPTURE_FILE_LIMIT)
    except Unreadable as problem:
        return Candidate(name, "hang-capture", 1, folder / relative, None,
                         refused=privacy.text(str(problem)))
    if relative.endswith((".txt", ".json")):
        return Candidate(name, "hang-capture", 1, path,
                         privacy.redactor.serialized(privacy.text(
                             data.decode("utf-8", "replace"))).encode())
    return Candidate(name, "hang-capture", 2, path, path,
                     refused=_binary_refusal(path, privacy, "a pickled Flight Recorder dump"))


def shown_reading(hang: HangInput, privacy: Privacy, prefix: str) -> HangReading:
    """A hang's reading as the issue shows it: its capture named by its place in the bundle
    (``hang/capture``) wherever the reading names the reporting machine's folder, and cleaned."""
    member = prefix + "capture"
    capture = hang.reading.capture.model_copy(update={"path": member})
    value = hang.reading.model_copy(update={"capture": capture}).model_dump(mode="json")
    names = {str(hang.folder), os.path.abspath(hang.folder), str(hang.reading.capture.path)}
    found = re.compile(r"(?<![\w./-])(?:" + "|".join(
        re.escape(name) for name in sorted(names, key=len, reverse=True)) + r")(?![\w-])")
    value = _strings(value, lambda text: found.sub(member, text))
    return HangReading.model_validate(privacy.json(value))


def _hang_members(hang: HangInput, privacy: Privacy, prefix: str, gpu_dumps: bool,
                  taken: set[Path]) -> Iterable[Candidate]:
    from ..hangs.files import load_capture
    from ..hangs.layout import CAPTURE

    yield Candidate(prefix + "reading.json", "hang", 0, hang.folder,
                    privacy.document(shown_reading(hang, privacy, prefix).model_dump(mode="json")))
    capture = load_capture(hang.folder)
    yield Candidate(prefix + "capture/" + CAPTURE, "hang-capture", 1, hang.folder / CAPTURE,
                    privacy.document(capture.model_dump(mode="json")))
    named = sorted({row.path for row in capture.sources if row.path and row.source != "gpu-dump"})
    for relative in named:
        yield _capture_file(hang.folder, relative, privacy, prefix + "capture/" + relative)
    for dump in hang.gpu_dumps:
        if not gpu_dumps or dump.resolve() in taken:  # a run's coredump: bundled as one
            continue
        name = prefix + "gpu-dumps/" + privacy.text(dump.name)
        refused = ("it may hold GPU global memory, where request data lives, and --anonymize "
                   "was asked for") if privacy.anonymizer is not None else \
            _binary_refusal(dump, privacy, "a coredump")
        yield Candidate(name, "coredump", 5, dump, dump, refused=refused)


def candidates(inputs: Inputs, privacy: Privacy,
               gpu_dumps: bool = False) -> tuple[list[Candidate], dict[Path, str]]:
    """Every possible member in the order they are tried, and the member name of each input
    file; GPU_DUMPS: the hang captures' GPU dumps too (--gpu-dumps)."""
    found: list[Candidate] = []
    taken: set[str] = set()
    names: dict[Path, str] = {}

    def named(directory: str, path: Path) -> str:
        name = _unique(directory + privacy.text(path.name), taken)
        names[path] = name
        return name

    for number, run in enumerate(inputs.runs):
        found += _run_members(run, privacy, "run/" if len(inputs.runs) == 1 else f"run-{number + 1}/")
    for number, bisect in enumerate(inputs.bisects):
        found += _bisect_members(bisect, privacy, bisect_folder(inputs, number))
    for core in inputs.all_cores:
        member = named("cores/", core.path)
        if core.report is not None:
            shown = bundled(core.report, core.path, member)
            found.append(Candidate(f"triage/{member.removeprefix('cores/')}.json", "triage", 0,
                                   core.path, privacy.document(shown.model_dump(mode="json"))))
        found.append(Candidate(member, "coredump", _core_rank(core), core.path, core.path,
                               refused=_core_refusal(core, privacy)))
    for dump in inputs.all_dumps:
        found += _dump_members(dump, privacy, named("requests/", dump.path))
    cores = {core.path.resolve() for core in inputs.all_cores}
    for number, hang in enumerate(inputs.hangs):
        found += _hang_members(hang, privacy, hang_folder(inputs, number), gpu_dumps, cores)
    return sorted(found, key=lambda c: (c.rank, c.size)), names
