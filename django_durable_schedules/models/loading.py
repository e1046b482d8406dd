"""Loading rows into model instances without ``Model.__init__`` (:class:`FastLoading`).

The worker loads every claimed and completed schedule row as a ``Schedule`` (about 40
columns), and the admin lists load 100 rows a page. ``Model.__init__`` sends ``pre_init``
and ``post_init`` and sets each field through ``setattr``: about a tenth of a worker's
CPU per run (``bench/profile_cycle.py --cprofile``). A full row read from the database
needs neither: :meth:`FastLoading.from_db` fills the instance's ``__dict__`` in one step,
which is what ``__init__`` leaves there for such a row.

It does so only where that is exactly equivalent, and otherwise calls Django's
``from_db``: when every value names a concrete field (a deferred field is left out of the
``__dict__``, as ``__init__`` leaves it out), when nobody listens
to ``pre_init`` or ``post_init`` for the model, and when every field's attribute on the
class is Django's plain deferred-attribute descriptor (no custom descriptor that
``setattr`` would run).
"""

from __future__ import annotations

from typing import Any, Self

from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

_ATTNAMES: dict[type, tuple[str, ...] | None] = {}
_ATTNAME_SETS: dict[type, frozenset[str]] = {}


def _attnames(cls: type) -> tuple[str, ...] | None:
    """The attribute names of ``cls``'s concrete fields in column order, or ``None`` when
    one of them has a descriptor other than Django's deferred attribute (cached).

    Django's own descriptors (``DeferredAttribute``, and ``ForeignKeyDeferredAttribute``
    for a foreign key's ``*_id``) read the instance's ``__dict__``; setting ``__dict__`` on
    a new instance is what ``setattr`` does through them (the foreign key's ``__set__``
    also forgets a cached related object, which a new instance does not have)."""
    try:
        return _ATTNAMES[cls]
    except KeyError:
        pass
    plain = (DeferredAttribute, ForeignKeyDeferredAttribute)
    names = tuple(f.attname for f in cls._meta.concrete_fields)  # type: ignore[attr-defined]
    ok = all(type(getattr(cls, name, None)) in plain for name in names)
    _ATTNAMES[cls] = names if ok else None
    _ATTNAME_SETS[cls] = frozenset(names)
    return _ATTNAMES[cls]


def _init_listeners(cls: type) -> bool:
    """Whether anyone listens to ``pre_init`` or ``post_init`` for ``cls``."""
    return bool(pre_init.receivers or post_init.receivers) and (
        pre_init.has_listeners(cls) or post_init.has_listeners(cls)
    )


class FastLoading:
    """Mixin for a model: rows read from the database skip ``Model.__init__`` (see the
    module docstring for when, and why it is equivalent)."""

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any, **kwargs: Any) -> Any:
        """Django's ``Model.from_db`` (``fetch_mode``, Django 6.1+, is kept), filling a
        full row's ``__dict__`` directly where that is equivalent."""
        names = _attnames(cls)
        if names is None or _init_listeners(cls):
            return super().from_db(db, field_names, values, **kwargs)  # type: ignore[misc]
        if len(values) != len(names):
            # Deferred fields (``defer()``, ``only()``): Django leaves them out of the
            # instance's ``__dict__`` (read on first access); ``field_names`` names the
            # values in their order.
            if len(field_names) != len(values) or not _ATTNAME_SETS[cls].issuperset(field_names):
                return super().from_db(db, field_names, values, **kwargs)  # type: ignore[misc]
            names = field_names
        new = cls.__new__(cls)
        state = ModelState()
        state.adding = False
        state.db = db
        fetch_mode = kwargs.get("fetch_mode")
        if fetch_mode is not None:
            state.fetch_mode = fetch_mode
        new.__dict__["_state"] = state
        new.__dict__.update(zip(names, values, strict=True))
        return new

    @classmethod
    def build(cls, **values: Any) -> Self:
        """A new, unsaved instance: ``cls(**values)`` for keyword arguments that are field
        attribute names (``schedule_id``, not ``schedule``); fields not given get their
        default. Skips ``Model.__init__`` where that is equivalent (as :meth:`from_db`)."""
        names = _attnames(cls)
        if names is None or not _ATTNAME_SETS[cls].issuperset(values) or _init_listeners(cls):
            return cls(**values)
        new = cls.__new__(cls)
        fields = new.__dict__
        fields["_state"] = ModelState()
        if len(values) < len(names):  # (every key is a field's: the superset check above)
            for field in cls._meta.concrete_fields:  # type: ignore[attr-defined]
                if field.attname not in values:
                    fields[field.attname] = field.get_default()
        fields.update(values)
        return new
