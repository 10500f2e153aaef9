"""Input fields of the API that take a value as the type it is sent as."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """DRF's ``CharField`` without its coercion of numbers: text must be sent as a string. ``123`` or ``1.5``
    is refused like an object or a list, with a field error ("Not a valid string."), never stored as "123"."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
