"""Supervising a server: launch it with coredumps on, watch it, keep and triage its crash.

``serve(ServeOptions(command=[...]))`` supervises a server (``crashlab serve`` runs it through
command.run, which also says where the run directory is and what came of it);
``dump_now(run_dir)`` is what ``crashlab dump-now`` triggers. See supervisor.py for the order of
events.
"""

from .dumpnow import DumpNowResult, dump_now
from .environment import CoredumpMode
from .options import RunOutcome, ServeOptions
from .supervisor import Supervisor, serve

__all__ = ["CoredumpMode", "DumpNowResult", "RunOutcome", "ServeOptions", "Supervisor",
           "dump_now", "serve"]
