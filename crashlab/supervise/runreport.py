"""The run's verdict: report.json / report.md over all its incidents, and its outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from .. import __version__
from ..errors import EXIT_FOUND, EXIT_NOTHING
from ..privacy.redact import Redactor
from ..report import run_views
from ..report.model import Source, Tool
from ..report.run import Deployment, Incident, RunReport
from ..signature.signing import compute_or_why as signature_of
from . import collect, files
from .manifest import Manifest, ManifestStore, Outcome


def build(run_dir: Path, manifest: Manifest, incidents: list[Incident]) -> RunReport:
    size = sum(f.size_bytes for f in manifest.files)
    report = RunReport(
        tool=Tool(version=__version__), status=status(incidents), summary=summary(incidents),
        source=Source(path=str(run_dir), size_bytes=size, kind="run"),
        command=manifest.command, incidents=incidents,
        warnings=[w for incarnation in manifest.incarnations for w in incarnation.warnings],
        deployment=Deployment(host=manifest.crashlab.host, label=manifest.options.get("deployment"),
                              role=manifest.role,
                              incident_window_s=manifest.options["incident_window"]))
    report.signature, _ = signature_of(report)  # why not: in its incident's notes
    return report


def status(incidents: list[Incident]) -> Literal["crash", "dumps", "survived"]:
    """The gravest kind of the run's incidents."""
    kinds = {incident.kind for incident in incidents}
    return "crash" if "crash" in kinds else "dumps" if "dumps" in kinds else "survived"


def summary(incidents: list[Incident]) -> str:
    """The incident's summary, or how many there were and the first's; faults the server
    survived are counted after the incidents that ended it, not told first."""
    ended = [incident for incident in incidents if incident.kind != "survived"]
    shown = ended or incidents
    said = shown[0].summary if len(shown) == 1 else f"{len(shown)} incidents; first: {shown[0].summary}"
    lived = len(incidents) - len(shown)
    return said + (f"; and {lived} fault{'s' * (lived != 1)} the server survived" if lived else "")


def write(run_dir: Path, store: ManifestStore, redactor: Redactor, incidents: list[Incident]) -> None:
    """Both views, written atomically and listed in the manifest, rewritten after each incident."""
    report = build(run_dir, store.manifest, incidents)
    files.write_atomic(run_dir / "report.json",
                       redactor.serialized(report.model_dump_json(indent=2)).encode() + b"\n")
    files.write_atomic(run_dir / "report.md",
                       redactor.serialized(run_views.markdown(report)).encode())
    store.add_files([collect.record(run_dir, run_dir / name, "report")
                     for name in ("report.json", "report.md")])


def outcome(run_dir: Path, manifest: Manifest, incidents: list[Incident]) -> Outcome:
    last = manifest.incarnations[-1] if manifest.incarnations else None
    if incidents:
        return Outcome(result=status(incidents), exit_code=EXIT_FOUND,
                       reason=build(run_dir, manifest, incidents).summary)
    if last is not None and last.stopped_by_crashlab:
        return Outcome(result="stopped", exit_code=EXIT_NOTHING, reason="stopped on request, no crash")
    return Outcome(result="clean-exit", exit_code=EXIT_NOTHING,
                   reason=f"server {last.exit.describe() if last and last.exit else 'ended'}")
