"""What SGLang itself writes around a crash, as a run report carries it: each record parsed,
secrets masked and cut to a budget by serve (crashlab.supervise.sglang_records) before it gets here.

Which release writes what (read from the releases' source):

- the kernel-API log: SGLang 0.5.23 (``sglang/kernels/kernel_api_logging.py``), when
  ``SGLANG_KERNEL_API_LOGLEVEL`` is 1 or more: a line per call of a wrapped kernel entry point,
  its inputs from level 3 (each tensor's shape, dtype, device), to the server's stdout, stderr
  or the file ``SGLANG_KERNEL_API_LOGDEST`` names (``%i``: the pid);
- py-spy's stacks: SGLang's crash path dumps every live scheduler with py-spy before it kills
  the server (``SGLANG_PYSPY_DUMP_BEFORE_CRASH``, on by default in 0.5.23), and its watchdog
  dumps the process it finds stuck; where py-spy is not on the PATH the log says so instead;
- the scheduler's batch lines (``Prefill batch, #new-seq: ...``, ``Decode batch, ...``): every
  release;
- the crash snapshot JSON beside the request dump (sgl-project/sglang#40300): no release yet;
  its fields are kept as written, not interpreted.
"""

from __future__ import annotations

from pydantic import Field

from ..published import ClosedModel as _Model
from ..published import empty_list


class KernelApiCall(_Model):
    """One call of a kernel entry point that SGLang's kernel-API log recorded."""

    time: str | None = None
    """The time SGLang printed before the call ([YYYY-MM-DD HH:MM:SS], the server's local time);
    null where none was printed."""
    function: str
    """SGLang's name for the entry point (sglang.quant_method.UnquantizedLinearMethod.apply)."""
    lines: list[str] = Field(default_factory=empty_list)
    """What the log said of its inputs and output (level 3 and up: each tensor's shape, dtype,
    device, contiguity), secrets masked, cut to a budget."""
    omitted_lines: int = 0
    """Lines of the call past the budget, counted but not kept."""
    exception: str | None = None
    """The exception the call raised (``IndexError: ...``), where the log recorded one."""
    returned: bool = False
    """The log recorded its output (level 3 and up), so it returned; the last call of a log
    whose other calls did, without one, had not returned when the log ended."""


class KernelApiLog(_Model):
    """The last calls of one kernel-API log: the kernels a crash came in, last one last."""

    source: str
    """Where they were read: a file serve collected (relative to the run directory) or the
    server's stdout.log / stderr.log."""
    calls: list[KernelApiCall]
    """The last calls, oldest first."""
    omitted_calls: int = 0
    """Calls before them in the part of the log read, counted but not kept."""


class SpyThread(_Model):
    """One thread of a py-spy dump."""

    thread: str
    """py-spy's thread id."""
    name: str | None = None
    """The thread's name (MainThread)."""
    state: str
    """py-spy's word: idle, active, gil, active+gil."""
    frames: list[str]
    """Its frames, innermost first, each as ``file.py:line function`` or ``function (library)``,
    cut to a budget."""


class SpyStacks(_Model):
    """py-spy's dump of one process, as SGLang printed it into its log before the server was
    killed, or why there is none."""

    pid: int | None
    """The process py-spy was pointed at."""
    threads: list[SpyThread] = Field(default_factory=empty_list)
    """Its threads, cut to a budget."""
    error: str | None = None
    """Why py-spy gave no stack (``py-spy: not found``), as SGLang logged it."""


class CrashSnapshot(_Model):
    """A JSON file SGLang wrote beside its request dump (the crash snapshot of
    sgl-project/sglang#40300, in no release yet), its top-level fields as written."""

    path: str
    """The file, relative to the run directory."""
    fields: dict[str, str]
    """Each top-level field, its value as compact JSON, secrets masked, cut to a length."""
    omitted_fields: int = 0
    """Fields past the budget, counted but not kept."""
    error: str | None = None
    """Why it could not be read (not JSON, not an object); null where it was."""


class SGLangRecords(_Model):
    """What SGLang itself wrote around the crash: the kernel-API log, py-spy's stacks, the last
    batch lines, the crash snapshot."""

    kernel_api: list[KernelApiLog] = Field(default_factory=empty_list)
    """Each kernel-API log's last calls (SGLANG_KERNEL_API_LOGLEVEL 1 and up)."""
    py_spy: list[SpyStacks] = Field(default_factory=empty_list)
    """py-spy's stacks of the processes SGLang dumped before it killed the server."""
    batches: list[str] = Field(default_factory=empty_list)
    """The scheduler's last batch lines (Prefill batch, Decode batch), oldest first, secrets
    masked."""
    crash_snapshots: list[CrashSnapshot] = Field(default_factory=empty_list)
    """The crash snapshot JSON files SGLang wrote beside its request dumps."""

    def empty(self) -> bool:
        return not (self.kernel_api or self.py_spy or self.batches or self.crash_snapshots)
