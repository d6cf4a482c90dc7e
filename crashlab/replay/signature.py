"""Crash signatures: which fault a replay's evidence shows, and whether it is the expected one.

"It crashed" is not enough: a replay that dies of a device-side assert while the recorded crash
was an illegal memory access in another kernel found another bug, and a minimizer that keeps it
shrinks toward the wrong reproducer (syzkaller learned this: google/syzkaller#251, #1051).
A signature here is a fault class (illegal-address, device-assert, ...), a kernel name, and any
regular expressions the user gave; the verdict compares what the evidence names with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .result import Expectation, ObservedFault

#: (class, expression). Texts of the CUDA runtime, the driver's exception names, PyTorch and
#: compute-sanitizer; the first class that matches a line names it.
CLASSES: tuple[tuple[str, re.Pattern], ...] = tuple((name, re.compile(pattern, re.I)) for name, pattern in (
    ("misaligned-address", r"misaligned address|cudaErrorMisalignedAddress|MISALIGNED_ADDRESS"),
    ("illegal-address", r"illegal memory access|illegal address|out-of-range address|"
                        r"cudaErrorIllegalAddress|ILLEGAL_ADDRESS|OUT_OF_RANGE_ADDRESS|"
                        r"Invalid __\w+__ (?:read|write)|Address \S+ is out of bounds"),
    ("illegal-instruction", r"illegal instruction|cudaErrorIllegalInstruction|ILLEGAL_INSTR"),
    ("device-assert", r"device-side assert|Warp Assert|WARP_ASSERT|Assertion .* failed|"
                      r"cudaErrorAssert"),
    ("launch-failure", r"unspecified launch failure|cudaErrorLaunchFailure"),
    ("nccl", r"NCCL error|collective operation timeout"),
    ("out-of-memory", r"out of memory|OutOfMemoryError"),
))
#: compute-sanitizer's frame of the faulting kernel, old and new layout:
#: "=========     at 0x1a0 in /t/oob.cu:5:oob_kernel(int *, int)"
#: "=========     at oob_kernel(int *, int)+0x1a0 in /t/oob.cu:5"
_SANITIZER_AT = (re.compile(r"^=+\s+at 0x[0-9a-fA-F]+ in (?:[^:\s]*:\d+:)?(.+?)\s*$"),
                 re.compile(r"^=+\s+at (.+?)\+0x[0-9a-fA-F]+(?: in .*)?$"))
#: "in kernel 'name'" / "kernel: name"; not PyTorch's "CUDA kernel errors might be ..."
_KERNEL_WORDS = re.compile(r"\bkernel(?::\s*|\s+['\"`])([A-Za-z_][\w:]*)", re.I)
LINES_KEPT = 20
#: A Python exception line as a traceback ends it: ``IndexError: ...``, ``torch.AcceleratorError: ...``.
PYTHON_EXCEPTION = r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)"
_PYTHON_EXCEPTION = re.compile(PYTHON_EXCEPTION)
#: What changes between two runs of the same bug inside an exception's message: numbers, addresses.
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")


def fault_class(text: str) -> str | None:
    for name, pattern in CLASSES:
        if pattern.search(text):
            return name
    return None


def exception_pattern(line: str) -> str | None:
    """A regular expression for the same exception in another run: the line as it is, except
    that its numbers and addresses may differ (``index \\d+ is out of bounds ...``); None when
    the line is not an exception line."""
    line = line.strip()[:200]
    if not _PYTHON_EXCEPTION.match(line):
        return None
    parts, last = [], 0
    for variable in _VARIABLE.finditer(line):
        parts.append(re.escape(line[last:variable.start()]))
        parts.append(r"0x[0-9a-fA-F]+" if variable[0].startswith("0x") else r"\d+")
        last = variable.end()
    parts.append(re.escape(line[last:]))
    return "".join(parts).replace("\\ ", " ")  # re.escape's escaped spaces only hurt reading


def short_kernel(name: str) -> str:
    """``void ns::fused_moe<float, 4>(float*, int)`` -> ``fused_moe``: what two reports of the
    same kernel share whatever their demangler printed."""
    name = re.sub(r"^\s*(?:void|static)\s+", "", name)
    depth, head = 0, []
    for char in name:  # drop template arguments and parameters
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == "(" and depth == 0:
            break
        elif depth == 0:
            head.append(char)
    return "".join(head).strip().split("::")[-1].split()[-1] if "".join(head).strip() else name


def kernels_in(line: str) -> list[str]:
    for pattern in _SANITIZER_AT:
        found = pattern.match(line.strip())
        if found:
            return [short_kernel(found[1])]
    return [short_kernel(found) for found in _KERNEL_WORDS.findall(line)]


def observe(lines: list[str], cores: Sequence[tuple[str | None, str | None]] = ()) -> ObservedFault:
    """The fault the evidence names: log lines, and (kernel, exception name) of new coredumps."""
    classes: list[str] = []
    kernels: list[str] = []
    for text in lines:
        found = fault_class(text)
        if found and found not in classes:
            classes.append(found)
        kernels += [name for name in kernels_in(text) if name not in kernels]
    for kernel, exception in cores:
        found = fault_class(exception or "")
        if found and found not in classes:
            classes.append(found)
        if kernel and short_kernel(kernel) not in kernels:
            kernels.append(short_kernel(kernel))
    return ObservedFault(classes=classes, kernels=kernels, lines=lines[:LINES_KEPT])


def compare(expected: Expectation | None, observed: ObservedFault,
            crashed: bool) -> tuple[str, str | None]:
    """(verdict, why it does not match). Only what the evidence names can contradict: a kernel
    the log does not mention is not a different kernel."""
    if not crashed:
        return "no crash", None
    if expected is None:
        return "crashed", None
    if not observed.lines and not observed.classes and not observed.kernels:
        return "unconfirmed", ("no fault line or coredump to compare with the expected crash "
                               "(give --watch-log, --watch-cores or --restart-cmd)")
    problems = _contradictions(expected, observed)
    if problems:
        return "different crash", "; ".join(problems)
    if expected.fault_class and not observed.classes and not expected.patterns:
        return "unconfirmed", f"no fault line names a fault class to compare with {expected.fault_class}"
    return "reproduced", None


def _contradictions(expected: Expectation, observed: ObservedFault) -> list[str]:
    """Where the replay's evidence names something other than the expectation: its fault class,
    its kernel, a --expect pattern no fault line matches."""
    problems = []
    if expected.fault_class and observed.classes and expected.fault_class not in observed.classes:
        problems.append(f"expected {expected.fault_class}, the replay shows "
                        f"{', '.join(observed.classes)}")
    if expected.kernel and observed.kernels:
        want = short_kernel(expected.kernel)
        if not any(want == name or want in name or name in want for name in observed.kernels):
            problems.append(f"expected kernel {want}, the replay names {', '.join(observed.kernels)}")
    for pattern in expected.patterns:
        if not any(re.search(pattern, line) for line in observed.lines):
            problems.append(f"no fault line matches --expect {pattern!r}")
    return problems
