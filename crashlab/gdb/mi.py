"""GDB/MI result records, as a debugger prints them for ``interpreter-exec mi "-..."``.

The MI grammar (tuples, lists, C strings with escapes) is parsed by pygdbmi's parser. pygdbmi
loops forever on a list that never closes (``^done,a=[`` as a killed debugger can leave it), so
a record is handed to it only once its brackets, braces and quotes are seen to balance.

Field and table names are cuda-gdb's (NVIDIA/cuda-gdb gdb/cuda/cuda-commands.c and
cuda-coords.c): ``CudaFocus={device,sm,warp,lane,kernel,grid,[clusterIdx,]blockIdx,threadIdx}``,
``InfoCudaKernelsTable={..., body=[InfoCudaKernelsRow={current,kernel,parent,device,grid,status,
sms_mask,gridDim,blockDim,invocation}]}``, ``InfoCudaLanesTable`` rows ``{current,lane,state,
physical_pc,threadIdx,exception}``.

cuda-gdb also answers with records that are not in the MI grammar, seen with 12.4
(fixtures/transcripts/): a value with no name (``^done,"CUDA focus unchanged.\n"`` for a switch to
the focus already current, ``^done,"kernel 0, grid 7, ..."`` for ``-cuda-focus-query``), and a
string whose newline is printed raw, so that the record ends on the next line. Such a value is
read as if it were named ``text``; the record is read up to the line where it closes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pygdbmi import gdbmiparser

from ..report.debugger import DebuggerFocus, DebuggerKernel

_DIM3 = re.compile(r"^\((\d+),(\d+),(\d+)\)$")
#: A C string (with its escapes) or any one other character; a lone '"' is a string left open.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|.', re.S)


@dataclass
class MiResult:
    """A ``^done`` (ok) or ``^error`` result record."""

    ok: bool
    payload: dict
    error: str | None = None

    @property
    def undefined(self) -> bool:
        """The debugger has no such MI command (GNU gdb, or a cuda-gdb too old for it)."""
        return not self.ok and (self.payload.get("code") == "undefined-command"
                                or "Undefined MI command" in (self.error or ""))


def well_formed(line: str) -> bool:
    """Brackets, braces and C strings of an MI record all close, in order."""
    closing = {"]": "[", "}": "{"}
    stack: list[str] = []
    for token in _tokens(line):
        if token == '"':
            return False  # a C string that never closes
        if token in ("[", "{"):
            stack.append(token)
        elif token in closing and (not stack or stack.pop() != closing[token]):
            return False
    return not stack


def _tokens(record: str) -> list[str]:
    """The record as C strings (quotes and escapes included) and single other characters."""
    return _TOKEN.findall(record)


def _records(output: str):
    """Each result record of ``output``, its raw newlines (only ever inside a string) escaped."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if not line.lstrip().startswith("^"):
            continue
        record = line.strip()
        for more in lines[index + 1:]:
            if well_formed(record):
                break
            record += "\\n" + more.rstrip()
        if well_formed(record):
            yield record


def _name_bare_values(record: str) -> str:
    """``^done,"text"`` -> ``^done,text="text"``: a top-level value without a name gets one."""
    out: list[str] = []
    depth = 0
    for token in _tokens(record):
        if token.startswith('"') and depth == 0 and out and out[-1] == ",":
            out.append("text=")
        depth += (token in ("[", "{")) - (token in ("]", "}"))
        out.append(token)
    return "".join(out)


def result(output: str) -> MiResult | None:
    """The result record in a command's output, or None if it has no well-formed one."""
    for line in _records(output):
        try:
            record = gdbmiparser.parse_response(_name_bare_values(line))
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        if record.get("type") != "result":
            continue
        payload = record.get("payload") or {}
        if not isinstance(payload, dict):
            payload = {}
        if record.get("message") == "error":
            return MiResult(False, payload, str(payload.get("msg", "error")))
        return MiResult(True, payload)
    return None


def dim3(text: str | None) -> tuple[int, int, int] | None:
    match = _DIM3.match((text or "").replace(" ", ""))
    if match is None:
        return None
    x, y, z = (int(v) for v in match.groups())
    return x, y, z


def integer(text: str | None) -> int | None:
    try:
        return int(str(text), 0)
    except (TypeError, ValueError):
        return None  # "*", "invalid", "current", "-" and the like


def focus(payload: dict) -> DebuggerFocus | None:
    found = payload.get("CudaFocus")
    if not isinstance(found, dict):
        return None
    return DebuggerFocus(
        device=integer(found.get("device")), sm=integer(found.get("sm")),
        warp=integer(found.get("warp")), lane=integer(found.get("lane")),
        kernel=integer(found.get("kernel")), grid=integer(found.get("grid")),
        cluster_idx=dim3(found.get("clusterIdx")), block_idx=dim3(found.get("blockIdx")),
        thread_idx=dim3(found.get("threadIdx")),
    )


def table_rows(payload: dict, table: str) -> list[dict]:
    body = (payload.get(table) or {}).get("body") if isinstance(payload.get(table), dict) else None
    return [row for row in body or [] if isinstance(row, dict)]


def split_invocation(invocation: str) -> tuple[str, str | None]:
    """``name(args)`` as cuda-gdb prints a launch: split at the parenthesis that closes last."""
    text = invocation.strip()
    if not text.endswith(")"):
        return text, None
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[index], 0)
        if depth == 0:
            return text[:index].strip(), text[index + 1:-1]
    return text, None


def kernels(payload: dict) -> list[DebuggerKernel]:
    out = []
    for row in table_rows(payload, "InfoCudaKernelsTable"):
        kernel = integer(row.get("kernel"))
        if kernel is None:
            continue
        name, args = split_invocation(row.get("invocation") or row.get("name") or "?")
        out.append(DebuggerKernel(
            kernel=kernel, device=integer(row.get("device")), grid=integer(row.get("grid")),
            status=row.get("status"), grid_dim=dim3(row.get("gridDim")),
            block_dim=dim3(row.get("blockDim")), name=name,
            args=row.get("args", args), current=row.get("current") == "*",
        ))
    return out


def current_lane_exception(payload: dict) -> str | None:
    """The Exception column of the lane in focus ('None' when the lane has none)."""
    for row in table_rows(payload, "InfoCudaLanesTable"):
        if row.get("current") == "*":
            return row.get("exception")
    return None


def value(payload: dict) -> int | None:
    """The value of ``-data-evaluate-expression`` when it is an integer."""
    text = str(payload.get("value", "")).split(" ")[0]
    return integer(text)
