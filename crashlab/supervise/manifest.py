"""manifest.json: the live record of a run, rewritten atomically whenever something happens.

Anyone (a user, ``crashlab dump-now``, a later ``crashlab report``) can read it at any moment
and get a whole, consistent document: status, times, every process with its exit code or
signal, the coredump variables and whose value each is, findings, and every collected file
with its size and sha256. Changes are batched: threads mark it changed, the supervisor loop
writes it at most every tick, and at once on the events that matter.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Literal

from pydantic import Field, ValidationError

from ..published import ClosedModel as _Model
from ..errors import BadInput
from ..privacy.redact import Redactor
from ..published import parse
from ..report.run import ExitStatus, FileRecord, Finding, ProcessRecord
from ..vocabulary import Role
from . import files

MANIFEST = "manifest.json"
MAX_FINDINGS = 200


class EnvironmentEntry(_Model):
    value: str
    set_by: Literal["crashlab", "user"]
    crashlab_value: str | None = Field(None, description="what crashlab would have set")


class Health(_Model):
    url: str | None
    state: str = "not polled"
    checks: int = 0
    failures: int = 0
    first_healthy_at: str | None = None
    last_error: str | None = None


class Incarnation(_Model):
    number: int
    directory: str
    status: str = Field(description="starting, running, healthy, unhealthy, crashing, stopping, "
                                    "exited, crashed, stopped")
    started_at: str
    ended_at: str | None = None
    pid: int | None = None
    exit: ExitStatus | None = None
    stopped_by_crashlab: bool = False
    incident: Literal["crash", "dumps"] | None = None
    health: Health
    kernel_log: str = Field(description="watched, or why Xid lines are not")
    processes: list[ProcessRecord] = Field(default_factory=list)
    forgotten_processes: int = Field(0, description="ended processes (clean or unseen exits) "
                                     "dropped past 1000 records, oldest first")
    findings: list[Finding] = Field(default_factory=list)
    omitted_findings: int = 0
    warnings: list[str] = Field(default_factory=list)


class Crashlab(_Model):
    version: str
    pid: int
    host: str
    process_started: float = Field(description="psutil create_time of the crashlab process")


class Outcome(_Model):
    result: Literal["crash", "dumps", "clean-exit", "stopped", "failed"]
    exit_code: int
    reason: str


class Manifest(_Model):
    schema_version: Literal[1] = 1
    kind: Literal["crashlab-run"] = "crashlab-run"
    status: str = Field(description="running, waiting-for-dumps, stopping, triaging, "
                                    "waiting-to-restart, done")
    created_at: str
    updated_at: str
    ended_at: str | None = None
    crashlab: Crashlab
    command: list[str] = Field(description="as given, secrets masked")
    cwd: str
    sglang: bool
    role: Role | None = Field(
        None, description="SGLang's --disaggregation-mode: prefill or decode server of a "
        "PD-disaggregated deployment, or plain; null when the command is not SGLang's")
    options: dict
    environment: dict[str, EnvironmentEntry]
    incarnations: list[Incarnation] = Field(default_factory=list)
    files: list[FileRecord] = Field(default_factory=list)
    outcome: Outcome | None = None


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
