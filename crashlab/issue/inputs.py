"""What ``crashlab report`` was given, read: serve run directories, bisect output folders, hang
captures, CUDA coredumps, SGLang request dumps, each told apart by what it is (a folder with a
manifest, a folder with a bisect's result or step log, a folder with a capture.json, a pickle's
first byte, an ELF or gzip file a coredump), each refused in one line when it is none of them. A
run directory with hang captures brings its newest one, read as ``crashlab inspect RUN_DIR``
reads it. An input given twice (the same file by another
path, or a dump with the same bytes) is read once: one crash, one triage, one member."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..bisect.model import RESULT, STEP_LOG, BisectResult
from ..coredump.constants import ELF_MAGIC, GZIP_MAGIC
from ..errors import BadInput
from ..hangs.model import HangReading
from ..index.copies import sha256_of
from ..launchline import RecordedLaunch
from ..published import parse
from ..replay.records import CrashDump
from ..report.model import TriageReport
from ..report.run import DumpTriage, RunReport
from ..supervise.manifest import MANIFEST, Manifest
from ..vocabulary import PICKLE_PROTO
from ..wrongverb import advised

RUN_REPORT = "report.json"
#: Where ``crashlab replay --minimize`` writes the minimal dump, beside the dump.
MINIMIZED_SUFFIX = ".min.pkl"


@dataclass
class CoreInput:
    path: Path
    report: TriageReport | None
    #: FAULT, COLLATERAL or UNREADABLE when a run triaged it; None for a core given directly
    label: str | None = None
    error: str | None = None
    #: where its triage was read from instead of inspecting it: the crash index's words for it
    kept: str | None = None


#: The triage the crash index keeps of a coredump given directly, looked up by the dump's path
#: with what was read so far (a run given names where an older index lies): (the triage, how
#: the index names it), or None.
KeptTriage = Callable[[Path, "Inputs"], "tuple[TriageReport, str] | None"]


@dataclass
class DumpInput:
    path: Path
    dump: CrashDump | None
    error: str | None = None

    @property
    def minimized(self) -> Path | None:
        """The reproducer ``crashlab replay --minimize`` left beside the dump, if any."""
        if self.path.name.endswith(MINIMIZED_SUFFIX):
            return None
        candidate = self.path.with_name(self.path.name.removesuffix(".pkl") + MINIMIZED_SUFFIX)
        return candidate if candidate.is_file() else None


@dataclass
class RunInput:
    path: Path
    manifest: Manifest
    report: RunReport | None = None
    cores: list[CoreInput] = field(default_factory=list)
    dumps: list[DumpInput] = field(default_factory=list)

    def launch(self, incarnation: int = 1) -> RecordedLaunch:
        """launch.json of an incarnation (argv and environment as run, secrets masked); empty
        when it is missing or unreadable (the manifest still has the command)."""
        from ..supervise import rundir

        return RecordedLaunch.read(rundir.incarnation(self.path, incarnation).launch)


@dataclass
class BisectInput:
    """A ``crashlab bisect --out`` folder: its verdict, and its step log where it is there."""

    path: Path
    result: BisectResult

    @property
    def step_log(self) -> Path | None:
        log = self.path / STEP_LOG
        return log if log.is_file() else None


@dataclass
class HangInput:
    """A hang capture read across its ranks: its folder and the reading of it."""

    folder: Path
    reading: HangReading
    #: the GPU dumps its capture.json names, each a file of the run (those that are there)
    gpu_dumps: list[Path] = field(default_factory=list)


@dataclass
class Inputs:
    runs: list[RunInput] = field(default_factory=list)
    cores: list[CoreInput] = field(default_factory=list)
    dumps: list[DumpInput] = field(default_factory=list)
    bisects: list[BisectInput] = field(default_factory=list)
    hangs: list[HangInput] = field(default_factory=list)
    #: one line per input left out as one given before (the same file, or the same bytes)
    repeats: list[str] = field(default_factory=list)

    @property
    def all_cores(self) -> list[CoreInput]:
        return [core for run in self.runs for core in run.cores] + self.cores

    @property
    def all_dumps(self) -> list[DumpInput]:
        return [dump for run in self.runs for dump in run.dumps] + self.dumps

    @property
    def found(self) -> bool:
        """Whether anything given shows a crash: an incident, a fault, recorded requests, a
        bisect whose --bad side reproduced it."""
        return (any(run.report is not None for run in self.runs)
                or any(bisect.result.bad_rate > 0 for bisect in self.bisects)
                or any(hang.reading.found for hang in self.hangs)
                or any(core.report is not None and core.report.found for core in self.all_cores)
                or any(dump.dump is not None and dump.dump.requests for dump in self.all_dumps))


def _triage(path: Path, explain: bool) -> TriageReport:
    from ..api import inspect

    return inspect(path, debugger=True, explain=explain)


def made_as_report_makes(triage: TriageReport) -> bool:
    """Whether a triage the index keeps stands for the one report would make: with cuda-gdb's
    view (report always asks for it) and explained (a triage made with --no-explain explains no
    fault and says what no kernel waits for). Any other is made again from the dump."""
    explained = any(f.explanation for f in triage.faults) or any(k.waits for k in triage.kernels)
    return triage.debugger is not None and explained


def _core(path: Path, explain: bool, inputs: Inputs, kept: KeptTriage | None) -> CoreInput:
    """A coredump given directly: the triage the index keeps of it where that one stands for
    report's own (never with --no-explain, which asks for less), else the dump inspected."""
    found = kept(path, inputs) if kept is not None and explain else None
    if found is not None and made_as_report_makes(found[0]):
        triage, where = found
        source = triage.source.model_copy(update={"path": str(path)})
        return CoreInput(path, triage.model_copy(update={"source": source}), kept=where)
    return CoreInput(path, _triage(path, explain))


def _request_dump(path: Path, strict: bool) -> DumpInput:
    """A request dump read; one a run collected that cannot be read is kept with the reason
    (the report says so), one given on the command line is refused."""
    from ..replay.loader import load

    try:
        return DumpInput(path, load(path))
    except BadInput as problem:
        if strict:
            raise
        return DumpInput(path, None, advised(problem))


def _run_report(path: Path) -> RunReport | None:
    try:
        return parse(RunReport, (path / RUN_REPORT).read_bytes())
    except FileNotFoundError:
        return None
    except (ValidationError, ValueError, OSError):
        raise BadInput(f"{path / RUN_REPORT}: cannot be read (not a crashlab run report)") from None


def _core_of(run_dir: Path, triage: DumpTriage) -> CoreInput:
    return CoreInput(run_dir / triage.path, triage.report, triage.label, triage.error)


def read_run(path: Path) -> RunInput:
    from ..supervise.manifest import load

    run = RunInput(path.resolve(), load(path))
    run.report = _run_report(run.path)
    if run.report is not None:
        for incident in run.report.incidents:
            run.cores += [_core_of(run.path, triage) for triage in incident.dumps]
            run.dumps += [_request_dump(run.path / record.path, strict=False)
                          for record in incident.request_dumps]
    return run


def read_hang(path: Path) -> HangInput | None:
    """The newest hang capture a folder holds (or is), read; None where it holds none."""
    from ..api import read_hang as reading_of
    from ..hangs.files import capture_folder, load_capture, run_folder

    folder = capture_folder(path)
    if folder is None:
        return None
    reading = reading_of(folder)
    run = run_folder(folder)
    dumps = [run / name for name in load_capture(folder).gpu_dumps
             if not Path(name).is_absolute() and (run / name).resolve().is_relative_to(run.resolve())
             and (run / name).is_file()]
    return HangInput(folder.resolve(), reading, dumps)


def is_bisect_folder(path: Path) -> bool:
    """A folder crashlab bisect wrote into: a verdict or a step log, and no run's manifest."""
    return not (path / MANIFEST).exists() and ((path / RESULT).exists() or (path / STEP_LOG).exists())


def read_bisect(path: Path) -> BisectInput:
    """A bisect's folder, read as a run report is: a later crashlab's fields left out; a verdict
    that is missing (a bisect stopped before its end) or unreadable is refused."""
    try:
        return BisectInput(path.resolve(), parse(BisectResult, (path / RESULT).read_bytes()))
    except FileNotFoundError:
        raise BadInput(f"{path}: holds a bisect's {STEP_LOG} but no {RESULT} (the bisect did not "
                       "finish)") from None
    except (ValidationError, ValueError, OSError):
        raise BadInput(f"{path / RESULT}: cannot be read (not a crashlab bisect result)") from None


def _kind_of(name: str, path: Path) -> str:
    """"pickle" or "coredump" by the file's first bytes; a file that starts as neither a pickle
    nor an ELF or gzip file is refused, naming both things it is not."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(ELF_MAGIC))
    except FileNotFoundError:
        raise BadInput(f"{name}: no such file or directory") from None
    except OSError as problem:
        raise BadInput(f"{name}: cannot be read ({problem.strerror or problem})") from None
    if head[:1] == bytes([PICKLE_PROTO]):
        return "pickle"
    if head and head[:2] != GZIP_MAGIC and not ELF_MAGIC.startswith(head):
        raise BadInput(f"{name}: neither a CUDA coredump nor an SGLang crash dump (it starts "
                       f"with {head.hex(' ')}: not an ELF file, not a pickle)")
    return "coredump"


def _given_before(name: str, path: Path, seen: dict[object, str]) -> str | None:
    """The name an input was given by before, where PATH is that file (the same resolved path)
    or, for a file, holds the same bytes; PATH is remembered otherwise."""
    keys: list[object] = [path.resolve()]
    if path.is_file():
        with contextlib.suppress(OSError):  # unreadable: the reader below says so
            keys.append(("sha256", sha256_of(path)))
    before = next((seen[key] for key in keys if key in seen), None)
    if before is None:
        seen.update(dict.fromkeys(keys, name))
    return before


def read(paths: list[str], explain: bool = True, kept: KeptTriage | None = None) -> Inputs:
    """What PATHS are, read, each file once; each coredump given directly triaged once every
    path is known (KEPT: the triage the crash index keeps of it)."""
    if not paths:
        raise BadInput("report needs a run directory, a bisect's folder, a coredump or a request dump")
    inputs = Inputs()
    cores: list[Path] = []
    seen: dict[object, str] = {}
    for name in paths:
        path = Path(name)
        before = _given_before(name, path, seen) if path.exists() else None
        if before is not None:
            same = "the same file" if Path(before).resolve() == path.resolve() else "the same bytes"
            inputs.repeats.append(f"{name}: {same} as {before}, given before: read once")
            continue
        if path.is_dir() and is_bisect_folder(path):
            inputs.bisects.append(read_bisect(path))
        elif path.is_dir():
            hang = read_hang(path)
            if hang is None or (path / MANIFEST).is_file():
                inputs.runs.append(read_run(path))
            if hang is not None:
                inputs.hangs.append(hang)
        elif _kind_of(name, path) == "pickle":
            inputs.dumps.append(_request_dump(path, strict=True))
        else:
            cores.append(path)
    inputs.cores = [_core(path, explain, inputs, kept) for path in cores]
    return inputs
