"""Random identifiers for the rows the worker writes on every run: :func:`uuid4`.

Each run writes three fresh UUIDs (the attempt's id and lease token, the receipt's id).
``uuid.uuid4()`` builds its result through ``UUID.__init__``, which checks and converts
its arguments in Python: about 3 microseconds here, against about 1 for the same value made
from the integer directly, as :func:`uuid4` does. The value is the same kind of value:
16 bytes from ``os.urandom`` with the version and variant bits of RFC 9562 §5.4 set, as
``uuid.uuid4()`` makes it. Nothing is buffered, so a forked child process never repeats
its parent's identifiers.

Where the running Python's ``uuid.UUID`` is not the class this relies on (``int`` and
``is_safe`` in ``__slots__``), :func:`uuid4` is ``uuid.uuid4`` itself.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

# RFC 9562 §4.1 and §4.2: the variant bits (10) in the top of octet 8, the version (0100)
# in the top of octet 6; uuid.UUID(..., version=4) sets the same bits.
_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_SET_BITS = (0x8000 << 48) | (4 << 76)
_new = object.__new__
_set = object.__setattr__
_UNKNOWN = uuid.SafeUUID.unknown


def _fast_uuid4() -> uuid.UUID:
    value = (int.from_bytes(os.urandom(16)) & _CLEAR) | _SET_BITS
    made = _new(uuid.UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made


def _choose() -> Callable[[], uuid.UUID]:
    """The fast maker when it makes what ``uuid.UUID`` would (checked once, at import)."""
    try:
        made = _fast_uuid4()
        same = uuid.UUID(int=made.int)
        if made == same and hash(made) == hash(same) and str(made) == str(same):
            if made.version == 4 and made.variant == uuid.RFC_4122:
                return _fast_uuid4
    except (AttributeError, TypeError, ValueError):  # another UUID class: the stdlib's
        pass
    return uuid.uuid4


#: ``uuid4() -> uuid.UUID``: a random (version 4) UUID, as ``uuid.uuid4()`` returns.
uuid4: Callable[[], uuid.UUID] = _choose()
