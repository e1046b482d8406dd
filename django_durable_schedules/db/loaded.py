"""What each schedule row was loaded as, so that a write can leave out what did not change.

:meth:`.fast_orm.FastLoading.from_db` keeps, on each row it loads (its ``_state``), the
attribute names and the values of the read: the very objects it put in the row's
``__dict__``, no copy. :func:`.batch.update_rows` compares a batch's values with them
(:func:`.batch.written_columns`) and writes only the columns some row changed: a claim or
a completion of a plain row changes about a third of the columns it may write.
"""

from __future__ import annotations

from typing import Any

#: Most distinct reads whose positions :func:`positions_of` keeps (emptied when full).
MAX_NAMES = 512

#: The attribute of a row's ``_state`` that holds what :meth:`.fast_orm.FastLoading.from_db` loaded.
READ = "dds_read"
#: ``{id(names): (names, {attribute: position})}`` of :func:`positions_of` (bounded).
_POSITIONS: dict[int, tuple[Any, dict[str, int]]] = {}


def read_of(row: Any) -> tuple[Any, list[Any]] | None:
    """``(names, values)``: the attribute names and the values ``row`` was loaded with
    from the database (by :meth:`.fast_orm.FastLoading.from_db`'s own path), the very objects now
    or once in its ``__dict__``; None for a row built, loaded otherwise, or written since
    (:func:`forget_reads`). ``names`` is the same object for every row of one read."""
    state = row.__dict__.get("_state")
    return None if state is None else state.__dict__.get(READ)


def forget_reads(rows: Any) -> None:
    """Forget what ``rows`` were read as (:func:`read_of`): they were written since."""
    for row in rows:
        state = row.__dict__.get("_state")
        if state is not None:
            state.__dict__.pop(READ, None)


def positions_of(names: Any) -> dict[str, int]:
    """``{attribute: position}`` of the attribute names of a read (:func:`read_of`),
    computed once per ``names`` object."""
    found = _POSITIONS.get(id(names))
    if found is not None and found[0] is names:
        return found[1]
    if len(_POSITIONS) >= MAX_NAMES:
        _POSITIONS.clear()
    positions = {name: i for i, name in enumerate(names)}
    _POSITIONS[id(names)] = (names, positions)
    return positions


__all__ = ["READ", "MAX_NAMES", "read_of", "forget_reads", "positions_of"]
