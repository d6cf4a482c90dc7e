"""manifest.json: the live record of a run, rewritten atomically whenever something happens.

Anyone (a user, ``crashlab dump-now``, a later ``crashlab report``) can read it at any moment
and get a whole, consistent document: status, times, every process with its exit code or
signal, the coredump variables and whose value each is, findings, and every collected file
with its size and sha256. Changes are batched: threads mark it changed, the supervisor loop
writes it at most every tick, and at once on the events that matter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from ..errors import BadInput
from ..privacy.redact import Redactor
from ..published import ClosedModel as _Model
from ..published import parse
from ..report.run import ExitStatus, FileRecord, Finding, ProcessRecord
from ..vocabulary import Role
from . import files

MANIFEST = "manifest.json"
MAX_FINDINGS = 200


class EnvironmentEntry(_Model):
    """One variable crashlab sets up in the server's environment (CUDA_ENABLE_COREDUMP_ON_EXCEPTION,
    TORCH_FR_BUFFER_SIZE, NCCL_RAS_ADDR, ...), and whose value it is."""

    value: str
    """The value the server was started with."""
    set_by: Literal["crashlab", "user"]
    """crashlab: crashlab set it; user: the user's environment already did, and crashlab kept
    it."""
    crashlab_value: str | None = None
    """what crashlab would have set"""


class Health(_Model):
    """How the server's health endpoint answered crashlab's polls."""

    url: str | None
    """The health URL polled (--health-url, else the one the launch command implies); null where
    there is none to poll."""
    state: str = "not polled"
    """The last state the polls saw: not polled, starting, healthy or unhealthy."""
    checks: int = 0
    """How many polls were sent."""
    failures: int = 0
    """How many of them failed (no answer in time, an error, a status other than 200)."""
    first_healthy_at: str | None = None
    """When the server first answered 200 (UTC, ISO 8601); null until it has."""
    last_error: str | None = None
    """What the last poll that found the server unhealthy saw (only after it was first healthy);
    null where none did."""


class Incarnation(_Model):
    """One start of the server under crashlab serve, from its launch to its end."""

    number: int
    """The incarnation's number, from 1."""
    directory: str
    """The incarnation's directory, relative to the run directory."""
    status: str
    """starting, running, healthy, unhealthy, crashing, stopping, exited, crashed, stopped"""
    started_at: str
    """When it was launched (UTC, ISO 8601)."""
    ended_at: str | None = None
    """When it ended (UTC, ISO 8601); null while it runs."""
    pid: int | None = None
    """The pid of the launched command; null until it has started."""
    exit: ExitStatus | None = None
    """How the launched command ended; null while it runs."""
    stopped_by_crashlab: bool = False
    """True where crashlab stopped the server."""
    incident: Literal["crash", "dumps"] | None = None
    """crash or dumps where the incarnation became an incident; null otherwise."""
    health: Health
    """How the server's health polls went."""
    kernel_log: str
    """watched, or why Xid lines are not"""
    processes: list[ProcessRecord] = Field(default_factory=list)
    """Every process of the server's tree crashlab saw."""
    forgotten_processes: int = 0
    """ended processes (clean or unseen exits) dropped past 1000 records, oldest first"""
    findings: list[Finding] = Field(default_factory=list)
    """Log lines that matched a fault pattern, at most 200."""
    omitted_findings: int = 0
    """Findings past the first 200, counted but not kept."""
    warnings: list[str] = Field(default_factory=list)
    """What crashlab met while supervising this incarnation and reports instead of failing."""


class CaptureLink(_Model):
    """A hang capture of the run (crashlab dump-now, or serve --hang-after): where it is and
    what it holds. Its capture.json (crashlab.hangs.layout) lists every source's row."""

    path: str
    """The capture's folder, relative to the run directory (captures/<time>)."""
    trigger: Literal["dump-now", "hang-after"]
    """dump-now: a user asked; hang-after: serve saw /health stop answering."""
    started_at: str
    """When the capture began (UTC, ISO 8601)."""
    ended_at: str | None = None
    """When it ended (UTC, ISO 8601); null while it runs, or where it was cut short."""
    ranks: int
    """How many ranks it sampled."""
    samples: int
    """Host samples asked of every rank."""
    rows: dict[str, int] = Field(default_factory=dict)
    """Its source rows by status (ok, missing, refused, timeout, failed, skipped)."""
    size_bytes: int = 0
    """The capture folder's files, capture.json included."""
    gpu_dumps: list[str] = Field(default_factory=list)
    """The GPU dumps taken at its end, relative to the run directory."""


class Crashlab(_Model):
    """The crashlab serve process that writes the manifest."""

    version: str
    """crashlab's version."""
    pid: int
    """The crashlab serve process's pid."""
    host: str
    """The host it runs on (its host name)."""
    process_started: float
    """psutil create_time of the crashlab process"""


class Outcome(_Model):
    """How the run ended, as crashlab serve's exit code says it."""

    result: Literal["crash", "dumps", "survived", "clean-exit", "stopped", "failed"]
    """crash or dumps: an incident was found; survived: only faults the server lived through
    were; clean-exit: the server exited on its own without one; stopped: stopped on request;
    failed: crashlab could not go on."""
    exit_code: int
    """crashlab serve's exit code."""
    reason: str
    """Why, in one line."""


class Manifest(_Model):
    """manifest.json: the live record of a run of crashlab serve, rewritten whole whenever
    something happens."""

    schema_version: Literal[1] = 1
    """Always 1; changes only when a field is renamed or removed, or changes type or meaning."""
    kind: Literal["crashlab-run"] = "crashlab-run"
    """Always crashlab-run."""
    status: str
    """running, waiting-for-dumps, stopping, triaging, waiting-to-restart, done"""
    created_at: str
    """When the run directory was made (UTC, ISO 8601)."""
    updated_at: str
    """When the manifest was last written (UTC, ISO 8601)."""
    ended_at: str | None = None
    """When the run ended (UTC, ISO 8601); null while it runs."""
    crashlab: Crashlab
    """The crashlab serve process."""
    command: list[str]
    """as given, secrets masked"""
    cwd: str
    """The folder the server was launched in."""
    sglang: bool
    """True where the launch command is SGLang's server."""
    role: Role | None = None
    """SGLang's --disaggregation-mode: prefill or decode server of a PD-disaggregated
    deployment, or plain; null when the command is not SGLang's"""
    options: dict
    """crashlab serve's options as given, the command excluded, a database password masked."""
    environment: dict[str, EnvironmentEntry]
    """The variables crashlab sets up in the current incarnation (coredumps, PyTorch's Flight
    Recorder, NCCL RAS), by name."""
    incarnations: list[Incarnation] = Field(default_factory=list)
    """Every start of the server, in order."""
    files: list[FileRecord] = Field(default_factory=list)
    """Every file collected into the run directory."""
    captures: list[CaptureLink] = Field(default_factory=list)
    """Every hang capture of the run, oldest first."""
    outcome: Outcome | None = None
    """How the run ended; null while it runs."""


class ManifestStore:
    """The one Manifest of a run; threads edit it under a lock, the loop saves it with every
    secret the redactor knows masked."""

    def __init__(self, run_dir: Path, manifest: Manifest, redactor: Redactor):
        self.path = run_dir / MANIFEST
        self.manifest = manifest
        self._redactor = redactor
        self._lock = threading.RLock()
        self._dirty = True

    @contextmanager
    def edit(self) -> Iterator[Manifest]:
        with self._lock:
            yield self.manifest
            self._dirty = True

    def add_finding(self, incarnation: Incarnation, finding: Finding) -> None:
        with self.edit():
            if len(incarnation.findings) < MAX_FINDINGS:
                incarnation.findings.append(finding)
            else:
                incarnation.omitted_findings += 1

    def add_files(self, records: list[FileRecord]) -> None:
        with self.edit() as manifest:
            known = {r.path: i for i, r in enumerate(manifest.files)}
            for record in records:
                if record.path in known:
                    manifest.files[known[record.path]] = record
                else:
                    manifest.files.append(record)

    def link_capture(self, link: CaptureLink) -> None:
        with self.edit() as manifest:
            known = {c.path: i for i, c in enumerate(manifest.captures)}
            if link.path in known:
                manifest.captures[known[link.path]] = link
            else:
                manifest.captures.append(link)

    def save(self, updated_at: str) -> None:
        with self._lock:
            self.manifest.updated_at = updated_at
            text = self.manifest.model_dump_json(indent=2)
            self._dirty = False
        files.write_atomic(self.path, self._redactor.serialized(text).encode() + b"\n")

    def save_if_dirty(self, updated_at: str) -> None:
        if self._dirty:
            self.save(updated_at)


def load(run_dir: Path) -> Manifest:
    """The manifest of a run directory; BadInput when the directory is not one."""
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise BadInput(f"{run_dir}: not a directory")
    try:
        return parse(Manifest, path.read_bytes())
    except FileNotFoundError:
        raise BadInput(f"{run_dir}: not a crashlab run directory (no {MANIFEST})") from None
    except (ValidationError, ValueError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not a crashlab manifest"
        raise BadInput(f"{path}: cannot be read ({reason})") from None
