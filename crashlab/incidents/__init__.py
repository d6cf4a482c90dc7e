"""Incidents: the crashes of one server's ranks, and of the servers of one deployment, with the
driver's Xid lines around them, grouped so that the first failure is read first.

Pure functions over plain records (crashlab.incidents.records): the crash index calls them on
its rows (crashlab.index.incidents).
"""

from .grouping import DEFAULT_WINDOW, Incident, group
from .records import Crash, XidLine

__all__ = ["DEFAULT_WINDOW", "Crash", "Incident", "XidLine", "group"]
