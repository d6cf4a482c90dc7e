"""Recording as the verbs do it: a crash was caught or read, and the index is a by-product, so an
index that cannot be opened or written costs one warning line, never the verb's result."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..hangs.model import HangReading
from ..incidents import XidLine
from ..report.kernellog import XidTriage
from ..report.model import TriageReport
from . import capture, copies
from .location import default_index, first_line, resolve, shown
from .records import NewCrash
from .store import Index

Records = Iterable[NewCrash | XidLine]


def record_all(crashes: Records | Callable[[], Records], db: str | None, runs_dir: Path,
               warn: Callable[[str], None],
               announce: Callable[[str], None] | None = None) -> int:
    """Record the crashes and Xid lines (or what the callable makes: building them reads files
    and computes signatures, which may fail too); the number of crashes newly recorded. Any
    failure is one warning. ANNOUNCE, where given, hears each crash's id and the index:
    "recorded as crash N in PATH" or "already recorded as crash N in PATH", with what a crash
    recorded before keeps of its host and deployment where the new record names others (said
    through WARN where there is no ANNOUNCE)."""
    address = resolve(db, runs_dir, warn)
    try:
        made = list(crashes() if callable(crashes) else crashes)
        if not made:
            return 0
        if address == str(default_index()):  # the one folder crashlab makes for its index
            default_index().parent.mkdir(parents=True, exist_ok=True)
        with Index(address) as index:
            new = 0
            for item in made:
                if isinstance(item, XidLine):
                    index.record_xid(item)
                    continue
                crash_id, added = index.record(item)
                new += added
                kept = None if added else _origin_kept(index, crash_id, item)
                said = (f"{'recorded' if added else 'already recorded'} as crash {crash_id} in "
                        f"{index.address}{f'; {kept}' if kept else ''}")
                if announce is not None:
                    announce(said)
                elif kept:
                    warn(said)
            return new
    except Exception as exc:  # noqa: BLE001 - the verb's own result must stand whatever happens
        warn(f"warning: the crash was not recorded in the index {shown(address)}: "
             f"{first_line(exc, address)}")
        return 0


def _origin_kept(index: Index, crash_id: int, crash: NewCrash) -> str | None:
    """What a crash recorded before keeps of where it happened, where CRASH names another host or
    deployment (the user's --host or --deployment given again, differently): the first record
    stands, and the line that says the crash was found says that too, rather than drop the
    user's word unseen."""
    if crash.host is None and crash.deployment is None:
        return None
    recorded = index.crash(crash_id)
    if recorded is None:
        return None
    differ = [(f"{what} {before or 'unknown'}", given)
              for what, before, given in (("host", recorded.host, crash.host),
                                          ("deployment", recorded.deployment, crash.deployment))
              if given is not None and given != before]
    if not differ:
        return None
    return (f"it keeps {' and '.join(kept for kept, _ in differ)} (recorded before), not "
            f"{' and '.join(given for _, given in differ)}")


def record_hang(folder: Path, reading: HangReading, db: str | None, say: Callable[[str], None],
                where: capture.Origin | None = None) -> None:
    """What ``inspect RUN_DIR --record`` does: record the hang the capture FOLDER shows, as a
    crash of kind hang; a reading no verdict places is said and not recorded."""
    hang = capture.from_hang(folder, reading, "inspect", where)
    if hang is None:
        say("warning: --record: no verdict places the hang, so it has no signature; not recorded")
        return
    record_all([hang], db, Path("crashlab-runs"), say, announce=say)


def record_kernel_log(path: str, triaged: XidTriage, db: str | None, say: Callable[[str], None],
                      where: capture.Origin | None = None) -> None:
    """What ``inspect --kernel-log FILE --record`` does with no dump: record the fault the log's
    Xid lines describe, as a crash of kind kernel-log; a log with no Xid is said and not
    recorded."""
    if triaged.signature is None:
        say("warning: --record: the kernel log holds no Xid line, so there is no signature; "
            "not recorded")
        return
    record_all(lambda: [crash for crash in [capture.from_kernel_log(Path(path), triaged,
                                                                    "inspect", where)] if crash],
               db, Path("crashlab-runs"), say, announce=say)


def record_core(core: str, report: TriageReport, db: str | None, copy: bool,
                say: Callable[[str], None], where: capture.Origin | None = None) -> None:
    """What ``inspect --record`` does: record the dump by reference, or (COPY) the copy the index
    takes of it; a copy taken for a crash recorded before (or not recorded at all) is not left
    behind. WHERE is where the dump came from (capture.origin: its run, or the user's --host
    and --deployment)."""
    if core == "-":
        say("warning: --record: a dump read from standard input is not recorded (no file to keep)")
        return
    address = resolve(db, Path("crashlab-runs"), say)
    try:
        digest = copies.sha256_of(Path(core))
        kept, made = copies.take(Path(core), address, digest) if copy else (None, False)
    except OSError as exc:  # the dump went, or the copies' folder cannot be written
        say(f"warning: the crash was not recorded in the index {shown(address)}: "
            f"{first_line(exc, address)}")
        return
    if not report.dump.timestamp:
        say("warning: --record: the dump holds no timestamp (no .cudbg.meta: a driver before "
            "r565); its crash time is the file's modification time, which a copy does not keep")
    new = record_all(lambda: [capture.from_coredump(Path(core), report, "inspect", kept, digest,
                                                    where)],
                     address, Path("crashlab-runs"), say, announce=say)
    if made and kept is not None and not new:
        copies.drop(kept)
        say("--copy: no copy kept (the crash was recorded before, or not at all)")
