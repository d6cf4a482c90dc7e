"""How crashlab writes a few small facts wherever it writes them: a dim3, a source chain, and
cuda-gdb's PC markers. The report views and the debugger comparison both use these, so a value
that agrees reads the same in the comparison as in the view."""

from __future__ import annotations


def dim(value) -> str:
    """``(1,0,0)``; ``-`` for a value not known."""
    return "(" + ",".join(str(v) for v in value) + ")" if value is not None else "-"


def short_source(chain) -> str:
    """``inner.h:10 <- caller.cu:24``: an inline chain, innermost first, with basenames (for a
    SASS listing's column and the one-line summary)."""
    return " <- ".join(f"{s.file.rsplit('/', 1)[-1]}:{s.line}" for s in chain)


def marker(instruction) -> str:
    """cuda-gdb's markers: ``*>`` the errorPC, ``=>`` the current PC, ``*=>`` both."""
    return {(True, True): "*=>", (True, False): "*>", (False, True): "=>"}.get(
        (instruction.faulting, instruction.current), ""
    )


def number_ranges(numbers: list[int]) -> str:
    """``1-31``, ``0, 2-5``: numbers (lane ids, log lines) as runs, ascending, each once."""
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def counted(count: int, word: str, plural: str | None = None) -> str:
    """``1 memory section``, ``4 memory sections``: a count and its noun in agreement (the
    plural is WORD + s unless given)."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"
