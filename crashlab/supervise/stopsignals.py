"""Ctrl-C, SIGTERM and a closing terminal stop the server as they would without crashlab in
between, and the caller's own handlers come back once supervision is over.

A handler only records the request (``Supervisor.request_stop``): the supervisor loop acts on
it, so a dump being written is waited for rather than cut off.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def stop_signals() -> list[signal.Signals]:
    """SIGINT and SIGTERM; SIGHUP too unless the process ignores it (nohup)."""
    stops = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        stops.append(signal.SIGHUP)
    return stops


@contextmanager
def forwarded_stops(request_stop: Callable[[int], None]) -> Iterator[None]:
    """Route the stop signals to ``request_stop`` meanwhile, then restore the previous handlers.

    Python lets only the main thread set handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in stop_signals()}
    for signum in previous:
        signal.signal(signum, lambda number, _frame: request_stop(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
