"""The environment section of a report: the machine that crashed, each fact labelled with where
it came from; the machine the report is made on only when asked (``--this-machine``).

Upstream needs the crashed machine. serve captured it at launch (<run-dir>/environment.json),
before anything could wedge; a coredump's own tables name its driver, CUDA version and GPUs
(name, SM type, SM count) wherever it is read. Without either (a request dump given alone, a
run of an older crashlab or with a damaged environment.json) the section says what is not known
and why, rather than describe the reporting machine, which is often a laptop without a GPU: an
H100 fault reported with "GPUs: none found" misleads whoever reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..env.model import Environment
from ..privacy.policy import Privacy
from ..report.model import TriageReport

FROM_RUN = "from the run's environment.json"
FROM_COREDUMP = "from the coredump"
THIS_MACHINE = "this machine, where the report was made (not the one that crashed)"


@dataclass(frozen=True)
class ReportEnvironment:
    #: the crashed machine, from the run's environment.json
    environment: Environment | None
    #: where the crashed machine's facts came from, as the report says it (report.json's
    #: environment_origin)
    origin: str
    #: (its name in the bundle, its triage): the coredump whose tables are shown
    coredump: tuple[str, TriageReport] | None = None
    #: why the run's environment is not shown, when it is not
    missing: str | None = None
    #: the reporting machine, captured now: only with --this-machine
    this_machine: Environment | None = None
    #: where the coredumps crashed as the user gave it (--host, --deployment; cleaned), not
    #: read from any file
    given_host: str | None = None
    given_deployment: str | None = None

    def versions(self) -> list[str]:
        """``sglang 0.5.6``, ``torch 2.9.1``, ``driver 580.65``, ``CUDA 13.0``: those known of the
        crashed machine, for the title."""
        env, dump = self.environment, self.coredump[1].dump if self.coredump else None
        found = []
        if env is not None:
            found += [f"sglang {p.version}" for p in env.packages
                      if p.name == "sglang" and p.status == "installed" and p.version]
            if env.torch is not None and env.torch.version:
                found.append(f"torch {env.torch.version}")
        driver = (env.driver.version if env else None) or (dump.driver_version if dump else None)
        cuda = (env.driver.cuda_version if env else None) or (dump.cuda_version if dump else None)
        if driver:
            found.append(f"driver {driver}")
        if cuda:
            found.append(f"CUDA {cuda}")
        return found


def _cleaned(found: Environment, privacy: Privacy) -> Environment:
    cleaned = Environment.model_validate(privacy.json(found.model_dump(mode="json")))
    if privacy.anonymized:
        cleaned.host_name = None
    return cleaned


def environment(run_dir: Path | None, privacy: Privacy, coredump: tuple[str, TriageReport] | None,
                this_machine: bool = False,
                given: tuple[str | None, str | None] = (None, None)) -> ReportEnvironment:
    """The crashed machine's facts from the run and the coredump (cleaned like everything else),
    the reporting machine's when asked, and the host and deployment the user GIVEN (--host,
    --deployment), labelled as the user's word."""
    from ..env import saved

    found = None
    missing: str | None = "no run directory was given (crashlab serve keeps one)"
    if run_dir is not None:
        missing = "the run has no environment.json"
        try:
            found = saved.load(run_dir)
        except saved.UnusableEnvironment as unusable:
            missing = f"the run's environment.json {privacy.text(unusable.reason)}"
    origins = []
    if found is not None:
        missing = None
        origins.append(f"{FROM_RUN}, captured by crashlab serve when the server was launched "
                       f"({found.captured_at})")
    if coredump is not None:
        origins.append(f"{FROM_COREDUMP} {coredump[0]}: driver, CUDA version and GPUs")
    here = None
    if this_machine:
        from ..env.capture import capture

        here = _cleaned(capture(), privacy)
    host, deployment = (privacy.text(value) if value else None for value in given)
    return ReportEnvironment(
        _cleaned(found, privacy) if found is not None else None,
        "; ".join(origins) or f"not known: {missing}", coredump, missing, here, host, deployment)


def _coredump_lines(report: TriageReport) -> list[str]:
    """check_env's grouping: ``GPU 0,1: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)``."""
    from ..report.markdown_escape import inline

    dump = report.dump
    out = [f"- NVIDIA driver: {inline(dump.driver_version or 'not recorded')}",
           f"- Driver CUDA version: {inline(dump.cuda_version or 'not recorded')}"]
    groups: dict[str, list[str]] = {}
    for device in report.devices:
        groups.setdefault(f"{device.name} ({device.sm_type}, {device.num_sms} SMs)", []).append(
            str(device.index))
    out += [f"- GPU {','.join(ids)}: {inline(what)}" for what, ids in groups.items()]
    return out or ["- GPUs: none in the dump's device table"]


def markdown(found: ReportEnvironment, full: bool = True) -> str:
    """The section's body; ``full=False`` leaves out the topology and the variables (to fit)."""
    from ..env import views
    from ..report.markdown_escape import code, inline

    def block(env: Environment) -> str:
        shown = env if full else env.model_copy(update={"topology": None, "variables": {}})
        return views.markdown(shown).rstrip("\n")

    paragraphs = []
    given = [(what, value) for what, value in (("host", found.given_host),
                                               ("deployment", found.given_deployment)) if value]
    if given:
        paragraphs.append(
            f"Where it crashed, in the reporter's words ({' and '.join(code(f'--{what}') for what, _ in given)}, "
            f"not read from any file): {', '.join(f'{what} {code(value)}' for what, value in given)}.")
    if found.environment is not None:
        paragraphs += [f"The crashed machine, {inline(FROM_RUN)} (captured by crashlab serve when the "
                       f"server was launched, {inline(found.environment.captured_at)}):",
                       block(found.environment)]
    else:
        paragraphs += [f"_The crashed machine's environment is not known: {inline(found.missing or '')}._"]
    if found.coredump is not None:
        name, report = found.coredump
        paragraphs += [f"The crashed machine, {inline(FROM_COREDUMP)} {code(name)}:",
                       "\n".join(_coredump_lines(report))]
    if found.this_machine is not None:
        paragraphs += [f"{inline(THIS_MACHINE[0].upper() + THIS_MACHINE[1:])}, asked for with "
                       f"{code('--this-machine')}:", block(found.this_machine)]
    return "\n\n".join(paragraphs) + "\n"
