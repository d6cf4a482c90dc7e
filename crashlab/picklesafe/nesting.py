"""How deep a walker over decoded data goes, and the one line it ends with past that.

A pickle's memo makes a list that contains itself in a few bytes, and nesting a thousand deep
in a few more. bounds.check refuses both once the whole file is read, walking iteratively; but a
request record is handed to the listing as soon as it is read (unpickler's ``on_record``), before
that check, and the walkers are used on values made elsewhere too (a scrubbed dump, a dump
written back). So every recursive walker over decoded data (records.plain and the token ids,
the request body, scrub, the writer) carries the path it is on, the containers it is inside
(``descend``): one it meets again is a reference cycle, refused at once as ``TooDeep`` naming
the container that contains itself; a path longer than ``WALK_DEPTH`` is refused as nested too
deep. One line either way, never a walk that does not end or Python's RecursionError.

``WALK_DEPTH`` is twice bounds.MAX_DEPTH: a walker counts some levels bounds.check does not (an
object's arguments tuple, its ``(dict, slots)`` state), and a tree that passed bounds.check must
never be refused here. At a few Python frames a level it stays well inside Python's default
limit of 1,000.
"""

from __future__ import annotations

from ..errors import BadInput
from .bounds import MAX_DEPTH, kind_name

WALK_DEPTH = 2 * MAX_DEPTH
#: The path of a walk: the ids of the containers it is inside, outermost first.
Path = tuple[int, ...]


class TooDeep(BadInput):
    """A walker met a container it is already inside (a reference cycle), or went past
    WALK_DEPTH. One line, exit 2; ``reason`` is the line without its "refused: ", for a reader
    that names the file it refuses."""

    def __init__(self, reason: str):
        super().__init__(f"refused: {reason}")
        self.reason = reason


def descend(path: Path, value, what: str = "values") -> Path:
    """The path inside ``value``, a container the walk is entering from ``path``; TooDeep when
    the walk is already inside it (``what``, the data walked, holds a reference cycle) or would
    go deeper than WALK_DEPTH."""
    key = id(value)
    if key in path:
        raise TooDeep(f"a {kind_name(value)} that contains itself (a reference cycle in the "
                      f"{what}, which no walk of them ends)")
    if len(path) >= WALK_DEPTH:
        raise TooDeep(f"{what} nested more than {WALK_DEPTH} deep")
    return (*path, key)
