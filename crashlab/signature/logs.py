"""The signature of a crash that left no GPU fault: read from serve's log findings and the
processes it watched (an Incident), most telling first:

1. a CUDA error line (in a traceback: with the exception's type and its innermost functions);
2. a Python traceback with an exception line: the process that raised it, the exception's type
   and its innermost functions;
3. an NCCL timeout: the watchdog's message and the collective (``OpType=ALLREDUCE``);
4. a signal that killed a process: the signal, the process's role, and the innermost functions
   of the native stack its handler printed;
5. a traceback without an exception line (an excerpt, a rank that died mid-print);
6. how the server ended.

Messages are left out (their numbers, shapes and ids change run to run, and they may quote a
user's data), and so are paths and line numbers (they move between installs and releases);
function names are kept.
"""

from __future__ import annotations

import re
import signal as signals

from ..logpatterns import BY_KIND, CHILD_CRASHED, CRASH_SIGNALS, SURVIVED_IN
from ..report.logline import message
from ..report.run import NO_EXCEPTION_LINE, Finding, Incident, TracebackFrame
from ..report.signature import CrashSignature, seal
from ..vocabulary import (
    CUDA_ERROR,
    FATAL,
    NCCL_TIMEOUT,
    SCHEDULER_EXCEPTION,
    SGLANG_CRASH,
    SURVIVED_FAULT,
    TRACEBACK,
)
from .names import normalise

#: Innermost frames a signature names.
FRAMES = 3
#: Frames that only dispatch to the next one (torch.nn.Module's call, torch's no_grad decorator).
DISPATCH_FRAMES = frozenset({"_call_impl", "_wrapped_call_impl", "decorate_context"})
_PATTERN = BY_KIND
_EXCEPTION_TYPE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::|$)")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_OP_TYPE = re.compile(r"OpType=(\w+)")
#: SGLang's "<Process> hit an exception" names the process; its roles as serve names them.
_RAISER = re.compile(r"(\w+?) hit an exception")
_ROLES = {"Scheduler": "scheduler", "DetokenizerManager": "detokenizer",
          "TokenizerManager": "tokenizer", "DataParallelController": "data_parallel_controller"}
#: A native stack printed by a segfault handler lists the innermost frame first.
_NATIVE_STACK = "Segfault encountered"
_RANK_SUFFIX = re.compile(r"_\d+$")


def of_incident(incident: Incident) -> CrashSignature:
    findings = incident.findings
    tracebacks = [f for f in findings if f.kind == TRACEBACK]
    for traceback in tracebacks:
        if _PATTERN[CUDA_ERROR].search(traceback.text):
            return _cuda_error(traceback, traceback, findings)
    cuda = next((f for f in findings if f.kind == CUDA_ERROR), None)
    if cuda is not None:
        return _cuda_error(cuda, None, findings)
    raised = next((t for t in tracebacks if not t.text.startswith(NO_EXCEPTION_LINE)
                   and not _native(t, findings)), None)
    if raised is not None:
        return _python(raised, findings)
    nccl = next((f for f in findings if f.kind == NCCL_TIMEOUT), None)
    if nccl is not None:
        return _nccl(nccl)
    death = _first_death(incident)
    if death is not None:
        return _signal(*death, findings)
    if tracebacks:
        return _python(tracebacks[0], findings)
    return _exit(incident)


def _cuda_error(finding: Finding, traceback: Finding | None, findings: list[Finding]) -> CrashSignature:
    said = _said(CUDA_ERROR, finding.text)
    parts, notes = [_variables_out(said)], ["a CUDA error in the log (no GPU coredump)"]
    title = said
    if traceback is not None:
        exception = _exception_type(traceback.text)
        frames = _frames(traceback, findings, notes)
        parts += [exception, *frames]
        title = f"{said} ({exception} in {frames[0]})" if frames else f"{said} ({exception})"
    return seal("cuda-error", parts, title, f'"{said}"', notes, parts[:2])


def _python(traceback: Finding, findings: list[Finding]) -> CrashSignature:
    notes = ["a Python traceback in the log: the process, the exception's type, the innermost "
             f"{FRAMES} functions (no message, paths or line numbers)"]
    raiser = _raiser(traceback, findings)
    no_line = traceback.text.startswith(NO_EXCEPTION_LINE)
    exception = "no exception line" if no_line else _exception_type(traceback.text)
    frames = _frames(traceback, findings, notes)
    parts = ([raiser] if raiser else []) + [exception, *frames]
    title = (f"{exception} in {frames[0]}" if frames else exception) + (f" ({raiser})" if raiser else "")
    named = next((f for f in frames if not f.startswith(("__", "<"))), None)  # not __call__, <module>
    search = " ".join(f'"{word}"' for word in ([] if no_line else [exception]) + [named] if word) \
        or f'"{exception}"'
    innermost = len(parts) - len(frames) + 1  # the callers of the raising function move
    return seal("python-exception", parts, title, search, notes, parts[:innermost])


def _nccl(finding: Finding) -> CrashSignature:
    said = _said(NCCL_TIMEOUT, finding.text)
    op = _OP_TYPE.search(finding.text)
    parts = [said] + ([f"OpType={op[1]}"] if op else [])
    notes = ["an NCCL watchdog message: the message and the collective (sequence numbers, "
             "sizes, ranks and timeouts left out)"]
    title = f"NCCL {said}" + (f" in {op[1]}" if op else "")
    return seal("nccl-timeout", parts, title, f'"{said}"' + (f" {op[1]}" if op else ""), notes)


def _signal(role: str, number: int, findings: list[Finding]) -> CrashSignature:
    name = _signal_name(number)
    parts, notes = [name, role], ["a process killed by a signal: the signal and the process's "
                                  "role (ranks left out)"]
    stack = next((t for t in findings if t.kind == TRACEBACK and _native(t, findings)), None)
    frames = _frames(stack, findings, notes) if stack is not None else []
    parts += frames
    title = f"{name} in {role}" + (f" at {frames[0]}" if frames else "")
    return seal("signal", parts, title, f'"{name}" {role}', notes, parts[:2])


def _exit(incident: Incident) -> CrashSignature:
    ended = incident.exit.describe() if incident.exit else "ended"
    notes = ["no fault line, dump or crash signal: how the server ended (an exit code is the "
             "program's own, so it is kept)"]
    return seal("exit", ["server", ended], f"server {ended}", f'"{ended}"', notes)


def _first_death(incident: Incident) -> tuple[str, int] | None:
    """(role, signal) of the first child the watchdog reported crashed with a negative exit code,
    else of the first process a crash signal ended."""
    roles = {p.pid: p.role for p in incident.processes}
    for finding in incident.findings:
        found = CHILD_CRASHED.search(finding.text) if finding.kind == SGLANG_CRASH else None
        if found and int(found["code"]) < 0:
            role = roles.get(int(found["pid"])) or _RANK_SUFFIX.sub("", finding.text[found.start():].split()[1])
            return role, -int(found["code"])
    for process in incident.processes:
        if process.exit is not None and process.exit.signal in CRASH_SIGNALS:
            return process.role, process.exit.signal
    return None


def _frames(traceback: Finding, findings: list[Finding], notes: list[str]) -> list[str]:
    """The innermost FRAMES function names, dispatch frames and bare addresses left out."""
    frames: list[TracebackFrame] = list(traceback.frames)
    native = _native(traceback, findings)
    if not native:
        frames.reverse()  # Python prints the innermost frame last
    else:
        notes.append("native stack: innermost frame first, bare addresses left out, C++ names "
                     "normalised as kernel names are")
    kept, skipped = [], False
    for frame in frames:
        function = frame.function.strip()
        if function in DISPATCH_FRAMES or _ADDRESS.match(function):
            skipped = skipped or function in DISPATCH_FRAMES
            continue
        kept.append(normalise(function)[0] if native else function)
        if len(kept) == FRAMES:
            break
    if skipped:
        notes.append("python-dispatch-frames: torch's module-call and decorator frames left out")
    return kept


def _native(traceback: Finding, findings: list[Finding]) -> bool:
    """A traceback right after a segfault handler's banner is a native stack."""
    return any(f.kind == FATAL and _NATIVE_STACK in f.text and f.stream == traceback.stream
               and f.line == traceback.line - 1 for f in findings)


def _raiser(traceback: Finding, findings: list[Finding]) -> str | None:
    """The process that caught the exception: the one SGLang's "hit an exception" line names,
    or, for a fault the server survived, the process that prints that line (the one that would
    have named itself had the fault killed the server, so that the two sign alike)."""
    for finding in findings:
        if finding.stream != traceback.stream:
            continue
        if finding.kind == SCHEDULER_EXCEPTION and finding.line == traceback.line:
            found = _RAISER.search(finding.text)
            return _ROLES.get(found[1], found[1].lower()) if found else None
        if finding.kind == SURVIVED_FAULT \
                and finding.line < traceback.line <= (finding.end_line or finding.line + 1):
            return SURVIVED_IN
    return None


def _said(kind: str, text: str) -> str:
    """What the scanner's pattern for ``kind`` matched; the line's message where the masking of
    secrets has changed the words it matched."""
    found = _PATTERN[kind].search(text)
    return found[0] if found else _variables_out(text)[:200]


def _exception_type(text: str) -> str:
    found = _EXCEPTION_TYPE.match(message(text))
    return found[1] if found else "exception"


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _variables_out(text: str) -> str:
    """Numbers and addresses, which change run to run, as N and 0xN."""
    return _VARIABLE.sub(lambda m: "0xN" if m[0].startswith("0x") else "N", message(text))
