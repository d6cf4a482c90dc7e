"""The crash index: every crash crashlab sees (serve, inspect --record, report), keyed by its
signature, in one SQLite file beside the runs directory or, for a fleet, one PostgreSQL server
(``--db postgresql://...`` or CRASHLAB_DB); ``crashlab list``, ``show`` and ``gc`` read it.

``Index(address)`` opens one (migrating it), ``recording.record_all`` records as the verbs do
(never failing them), ``capture`` turns reports into the crashes to record.
"""

from .records import Crash, NewCrash
from .store import Filters, Index

__all__ = ["Crash", "Filters", "Index", "NewCrash"]
