"""Supervising a server: launch it with coredumps on, watch it, keep and triage its crash.

``serve(ServeOptions(command=[...]))`` is what ``crashlab serve`` runs; ``dump_now(run_dir)``
what ``crashlab dump-now`` runs. See supervisor.py for the order of events.
"""

from .dumpnow import DumpNowResult, dump_now
from .environment import CoredumpMode
from .options import RunOutcome, ServeOptions
from .supervisor import Supervisor, serve

__all__ = ["CoredumpMode", "DumpNowResult", "RunOutcome", "ServeOptions", "Supervisor",
           "dump_now", "serve"]
