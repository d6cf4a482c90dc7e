"""Incidents: the crashes of one server's ranks, and of the servers of one deployment, with the
driver's Xid lines around them, grouped so that the first failure is read first.

Pure functions over plain records (crashlab.incidents.records): the crash index calls them on
its rows (crashlab.index.incidents).

The names below are imported on first use, as crashlab.index's are: the command line reads the
window's default (crashlab.incidents.window) at start-up, for every command, and the grouping's
imports would cost each of them about 15 ms.
"""

__all__ = ["DEFAULT_WINDOW", "Crash", "Incident", "XidLine", "group"]


def __getattr__(name: str):
    if name in ("Incident", "group"):
        from . import grouping
        return getattr(grouping, name)
    if name in ("Crash", "XidLine"):
        from . import records
        return getattr(records, name)
    if name == "DEFAULT_WINDOW":
        from .window import DEFAULT_WINDOW
        return DEFAULT_WINDOW
    raise AttributeError(f"module 'crashlab.incidents' has no attribute {name!r}")
