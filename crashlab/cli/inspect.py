"""crashlab inspect: read a CUDA coredump natively and print its report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from ..errors import EXIT_FOUND, EXIT_NOTHING, BadInput
from ..guard import GuardedCommand, say
from .options import db_option, json_option, markdown_option, origin_options


@click.command(cls=GuardedCommand, subject="core")
@click.argument("core", type=click.Path(dir_okay=True, allow_dash=True), required=False)
@json_option("Print the JSON report (schema: crashlab schema).")
@markdown_option("Print a GitHub issue body (at most 65,536 characters).")
@click.option("--no-sass", is_flag=True, help="Skip disassembly (nvdisasm is not run).")
@click.option("--no-explain", is_flag=True,
              help="Skip the explanation of each fault (its address, bound and roots).")
@click.option("--context", type=click.IntRange(0, 200), default=8, show_default=True,
              help="SASS instructions shown on each side of the faulting one.")
@click.option("--debugger", is_flag=True,
              help="Add cuda-gdb's view of each fault and whether it agrees with crashlab's. "
                   "Without cuda-gdb the report is the same, its debugger section says why it is "
                   "empty, and the exit code does not change.")
@click.option("--record", is_flag=True,
              help="Also record the crash in the crash index (see crashlab list), by reference: "
                   "the dump stays yours, and crashlab gc never deletes it (past the retention "
                   "the index forgets it).")
@click.option("--copy", is_flag=True,
              help="With --record: the index keeps a copy of the dump in its own folder "
                   "(crashlab-copies beside the index file); gc may delete that copy, never "
                   "the original.")
@click.option("--kernel-log", "kernel_log", type=click.Path(dir_okay=False),
              help="A file of dmesg, journalctl -k or syslog text from the crashed node: its "
                   "Xid lines are decoded and held against the dump's faults. Without CORE, "
                   "the incident is triaged from the log alone.")
@origin_options("With --record")
@db_option
def inspect(core: str | None, as_json: bool, as_markdown: bool, no_sass: bool, no_explain: bool,
            context: int, debugger: bool, kernel_log: str | None, record: bool, copy: bool,
            host: str | None, deployment: str | None, db: str | None) -> None:
    """Explain a CUDA GPU coredump: faulting kernel, exception, block, thread, PC, SASS, source.

    CORE is a .nvcudmp file, gzip-compressed or not, or - for standard input. No GPU and no
    cuda-gdb are needed; SASS needs nvdisasm (pip install nvidia-cuda-nvdisasm).

    CORE may also be a run directory with a hang capture (crashlab dump-now, serve
    --hang-after) or a capture's folder: inspect then reads the hang across its ranks (Flight
    Recorder, py-spy, NCCL RAS, each rank's GPU dump) and says which rank never entered which
    collective, what the others wait in and where the lagging rank stands; --json prints it
    (schema: crashlab schema hang); --record records it in the crash index as a hang, signed
    by its collective.

    With --kernel-log FILE and no CORE, the incident is triaged from the driver's Xid lines
    alone (the fault, its address and whose fault NVIDIA's catalog says it is; the kernel stays
    unknown); --json prints it (schema: crashlab schema xid-triage); --record records it in
    the crash index as a kernel-log crash (no dump), signed by its Xid fault, so that the same
    fault on another run or host groups with it.

    Exit codes: 0 a fault found (a hang: a verdict places it; a log: an Xid line), 1 none (a
    dump with no exception; a hang no verdict places; a log with no Xid line), 2 bad input.

    \b
    Examples:
      crashlab inspect core_1754_node_12345.nvcudmp
      crashlab inspect core.nvcudmp.gz --markdown > issue.md
      crashlab inspect core.nvcudmp --json | jq '.faults[0].kernel'
      crashlab inspect core.nvcudmp --debugger
      crashlab inspect core.nvcudmp --record \\
          --db postgresql://crashlab@db.internal/crashes
      crashlab inspect /scratch/core.nvcudmp --record --copy
      crashlab inspect core-from-node7.nvcudmp --record --host node7
      crashlab inspect runs/20261206-080000-sglang
      crashlab inspect RUN/captures/20261206T081500Z --json
      crashlab inspect core.nvcudmp --kernel-log node7-dmesg.txt
      crashlab inspect --kernel-log node7-journalctl-k.txt
      crashlab inspect --kernel-log node7-journalctl-k.txt --record --host node7
    """
    from ..api import inspect as inspect_core
    from ..stdout import echo

    if as_json and as_markdown:
        raise BadInput("choose one of --json and --markdown")
    for given, name in ((db, "--db"), (copy, "--copy"), (host, "--host"),
                        (deployment, "--deployment")):
        if given and not record:
            raise BadInput(f"{name} is for --record: add --record to record the crash")
    if core is None:
        if kernel_log is None:
            raise BadInput("give a CORE to inspect, or --kernel-log FILE to triage from a log")
        _log_alone(kernel_log, as_json, as_markdown, {"--debugger": debugger, "--copy": copy},
                   record=(db, host, deployment) if record else None)
    if core != "-" and Path(core).is_dir():
        from ..hangs.files import capture_folder

        if capture_folder(Path(core)) is not None:
            _hang(core, as_json, {"--markdown": as_markdown, "--debugger": debugger,
                                  "--copy": copy, "--kernel-log": kernel_log is not None},
                  sass=not no_sass,
                  record=(db, host, deployment) if record else None)
    where = None
    if (record or kernel_log is not None) and core != "-":
        from ..index.capture import origin  # a --host the dump's run contradicts is refused here

        where = origin(Path(core), host, deployment)
    report = inspect_core(core, sass=not no_sass, context=context, debugger=debugger,
                          explain=not no_explain, kernel_log=kernel_log,
                          host=where.host if where is not None else None)
    if report.debugger is not None and report.debugger.status in ("unavailable", "failed"):
        say(f"--debugger: {report.debugger.reason}; the native report stands")
    if record:
        from ..index.recording import record_core

        record_core(core, report, db, copy, say, where)
    if as_json:
        echo(report.model_dump_json(indent=2))
    elif as_markdown:
        from ..report import markdown

        echo(markdown.render(report), nl=False)
    else:
        from ..console import ViewConsole
        from ..report import terminal

        terminal.render(report, ViewConsole())
    sys.exit(EXIT_FOUND if report.found else EXIT_NOTHING)


def _log_alone(path: str, as_json: bool, as_markdown: bool, refused: dict[str, bool],
               record: tuple[str | None, str | None, str | None] | None) -> NoReturn:
    """inspect --kernel-log with no dump: the incident the Xid lines describe; RECORD (--db,
    --host, --deployment), where given, records it in the crash index as a kernel-log crash."""
    from ..advice.evidence import advised_log
    from ..incidents.kernellogfile import read_kernel_log
    from ..incidents.xidtriage import triage
    from ..stdout import echo

    for name, given in refused.items():
        if given:
            raise BadInput(f"{name} reads a coredump: give CORE beside --kernel-log")
    triaged = triage(read_kernel_log(path))
    triaged.advice = advised_log(triaged.kernel_log)
    if record is not None:
        from ..index.capture import Origin
        from ..index.recording import record_kernel_log

        record_kernel_log(path, triaged, record[0], say, Origin(host=record[1],
                                                                deployment=record[2]))
    if as_json:
        echo(triaged.model_dump_json(indent=2))
    elif as_markdown:
        from ..report.markdown import xid_triage

        echo(xid_triage(triaged), nl=False)
    else:
        from ..console import ViewConsole
        from ..report.terminal import xid_triage as show

        show(triaged, ViewConsole())
    sys.exit(EXIT_FOUND if triaged.found else EXIT_NOTHING)


def _hang(path: str, as_json: bool, refused: dict[str, bool], sass: bool,
          record: tuple[str | None, str | None, str | None] | None) -> None:
    """inspect of a hang capture: the reading across ranks, as text or --json; RECORD (--db,
    --host, --deployment), where given, records it in the crash index as a hang."""
    from ..api import read_hang
    from ..console import ViewConsole
    from ..hangs import terminal
    from ..hangs.files import capture_folder
    from ..hangs.layout import CAPTURE
    from ..stdout import echo

    for name, given in refused.items():
        if given:
            raise BadInput(f"{name} is for a coredump; a hang capture prints as text or --json "
                           "(inspect each rank's GPU dump for more)")
    folder = capture_folder(Path(path))
    assert folder is not None  # inspect only comes here for a folder that holds one
    where = None
    if record is not None:  # a --host the capture's run contradicts is refused before reading
        from ..index.capture import origin

        where = origin(folder / CAPTURE, record[1], record[2])
    reading = read_hang(folder, sass=sass)
    if record is not None:
        from ..index.recording import record_hang

        record_hang(folder, reading, record[0], say, where)
    if as_json:
        echo(reading.model_dump_json(indent=2))
    else:
        terminal.render(reading, ViewConsole())
    sys.exit(EXIT_FOUND if reading.found else EXIT_NOTHING)
