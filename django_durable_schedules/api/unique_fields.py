"""A unique field checked by the database's write, not by a probe before it: the mixin
:class:`UniqueAtWrite` drops DRF's ``UniqueValidator`` of the fields a ``ModelSerializer``
lists in ``unique_at_write`` and says the same message, with the same probe, only when a
request fails (:meth:`UniqueAtWrite.taken`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.utils.field_mapping import get_unique_validators
from rest_framework.validators import UniqueValidator


class UniqueAtWrite(serializers.ModelSerializer):
    """A ``ModelSerializer`` whose ``unique_at_write`` fields (a unique constraint of the
    model on that one field) are not probed on the way in: the write enforces them, and a
    refusal is reported by the caller with :meth:`taken`'s message (DRF's own, as its
    ``UniqueValidator`` says it). A request refused field by field still says a taken value
    beside the other messages, as DRF's validator did."""

    unique_at_write: tuple[str, ...] = ()

    def build_standard_field(self, field_name: str, model_field: Any) -> Any:
        field_class, field_kwargs = super().build_standard_field(field_name, model_field)
        if field_name in self.unique_at_write:
            validators = field_kwargs.get("validators", [])
            field_kwargs["validators"] = [
                v for v in validators if not isinstance(v, UniqueValidator)
            ]
        return field_class, field_kwargs

    def taken(self, field_name: str, value: Any) -> list[str]:
        """DRF's uniqueness message when another row has ``value`` in ``field_name`` (one
        query), else ``[]``."""
        if value is None:
            return []
        model_field = self.Meta.model._meta.get_field(field_name)  # type: ignore[attr-defined]
        field = self.fields[field_name]
        for validator in get_unique_validators(field_name, model_field):
            try:
                validator(value, field)
            except serializers.ValidationError as exc:
                return [str(m) for m in exc.detail]
        return []

    def to_internal_value(self, data: Any) -> Any:
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = exc.detail
            if not isinstance(detail, dict) or not isinstance(data, Mapping):
                raise
            found: dict[str, Any] = {}
            for name in self.unique_at_write:
                if name in detail or name not in data:
                    continue
                try:
                    value = self.fields[name].run_validation(data[name])
                except serializers.ValidationError:
                    continue
                messages = self.taken(name, value)
                if messages:
                    found[name] = messages
            if not found:
                raise
            raise serializers.ValidationError({**found, **detail}) from None
