"""The crash index: every crash crashlab sees (serve, inspect --record, report), keyed by its
signature, in one SQLite file (in the XDG data folder by default, crashlab.index.location) or,
for a fleet, one PostgreSQL server (``--db postgresql://...`` or CRASHLAB_DB); ``crashlab
list``, ``show`` and ``gc`` read it.

``Index(address)`` opens one (migrating it), ``recording.record_all`` records as the verbs do
(never failing them), ``capture`` turns reports into the crashes to record.

The names below are imported on first use: ``crashlab list`` reads the index without the pydantic
records behind Crash and NewCrash, whose import costs more than listing 100,000 crashes.
"""

__all__ = ["Crash", "Filters", "Index", "NewCrash"]


def __getattr__(name: str):
    if name in ("Crash", "NewCrash"):
        from . import records
        return getattr(records, name)
    if name in ("Filters", "Index"):
        from . import store
        return getattr(store, name)
    raise AttributeError(f"module 'crashlab.index' has no attribute {name!r}")
