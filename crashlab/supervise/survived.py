"""Faults the server survives: each its own incident, signed like a crash, while the server lives.

SGLang 0.5.23 answers some faults with an HTTP 500 and goes on: its OpenAI endpoints log
``Error in request: ...`` and uvicorn ``Exception in ASGI application``, each followed by the
traceback (crashlab.logpatterns' survived-fault lines). No release has ``--debug-mode`` yet
(sgl-project/sglang#33340 is open, #32026 was closed unmerged), which would do the same for an
exception in a batch. serve turns each such line and the traceback chain it prints into an
incident of kind "survived", recorded in the crash index as soon as the traceback is in; the
same traceback is signed as it would be had it killed the server, so the two join one
signature. A survived fault's findings are no part of a later crash's incident: the crash is
signed by its own traceback.
"""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta

from ..report.logline import SGLANG_PREFIX
from ..report.run import Finding, Incident
from ..signature.signing import compute_or_why as signature_of
from ..vocabulary import SURVIVED_FAULT, TRACEBACK
from .manifest import Incarnation

#: SGLang's logger writes a record and its traceback in one write: a survived-fault line read
#: this long ago has its whole traceback read too.
SETTLE_SECONDS = 2.0
#: A chained traceback starts this many lines after the end of the one before it at most (a
#: blank line, Python's line that chains them, a blank line).
CHAIN_GAP = 4
#: Python's lines between two tracebacks of one chain.
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")

Key = tuple[str, int]


def key(finding: Finding) -> Key:
    return finding.stream, finding.line


def chain(line: Finding, findings: list[Finding]) -> list[Finding]:
    """The survived-fault line, its end_line the chain's, then the tracebacks it printed: the
    one on the line after it, and each chained to the one before (not a traceback of another
    log record that follows)."""
    tracebacks = sorted((f for f in findings if f.kind == TRACEBACK and f.stream == line.stream
                         and f.line > line.line), key=lambda f: f.line)
    found: list[Finding] = []
    end = line.line
    for traceback in tracebacks:
        first = not found and traceback.line == line.line + 1
        chained = found and traceback.line - end <= CHAIN_GAP \
            and any(said in before for before in traceback.before for said in CHAINED)
        if not (first or chained):
            break
        found.append(traceback)
        end = traceback.end_line or traceback.line
    return [line.model_copy(update={"end_line": end}), *found]


def settled(findings: list[Finding], done: set[Key], now: datetime,
            closed: bool = False) -> list[list[Finding]]:
    """The chains of the survived faults not yet made incidents whose tracebacks are in (every
    one, once the streams are ``closed``)."""
    ready = []
    for finding in findings:
        if finding.kind != SURVIVED_FAULT or key(finding) in done:
            continue
        if closed or now - datetime.fromisoformat(finding.time) >= timedelta(seconds=SETTLE_SECONDS):
            ready.append(chain(finding, findings))
    return ready


def consumed(findings: list[Finding], done: set[Key]) -> set[Key]:
    """The findings of the survived faults ``done``: their lines and their tracebacks."""
    keys: set[Key] = set()
    for finding in findings:
        if finding.kind == SURVIVED_FAULT and key(finding) in done:
            keys.update(key(f) for f in chain(finding, findings))
    return keys


def without(incarnation: Incarnation, keys: set[Key]) -> Incarnation:
    """The incarnation as its crash is read: the survived faults' findings left out."""
    return incarnation.model_copy(update={"findings": [f for f in incarnation.findings
                                                       if key(f) not in keys]})


def incident(incarnation: Incarnation, found: list[Finding]) -> Incident:
    line, tracebacks = found[0], found[1:]
    said = SGLANG_PREFIX.sub("", line.text.strip())
    raised = tracebacks[-1].text.strip() if tracebacks else "no traceback"
    where = f"{line.stream} line {line.line}"
    built = Incident(
        incarnation=incarnation.number, directory=incarnation.directory, kind="survived",
        started_at=line.time, ended_at=line.time, exit=None, stopped_by_crashlab=False,
        summary=f"{said[:200]} ({raised[:200]}); the server answered with an error and lived on",
        dumps=[], findings=found,
        notes=[f"the fault is at {where} of {shlex.quote(incarnation.directory)}; the server "
               "went on serving"])
    built.signature, why = signature_of(built)
    built.notes.extend([why] if why else [])
    return built
