"""Admin building blocks shared by the apps, whatever their place in the layering (``authorities`` sits below
``chats``, ``citations`` above it): each app's admin imports them from here, so no app reaches up for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.admin.options import BaseModelAdmin
from django.http import HttpRequest


class ReadOnlyAdminMixin(BaseModelAdmin):
    """Read-only means read-only, superusers included: no add, change or delete, no bulk actions,
    every field read-only. The change page still renders (view permission), read-only; the add,
    delete and change-POST URLs answer 403. Works for ``ModelAdmin`` and ``InlineModelAdmin``."""

    actions: Sequence[Any] | None = None

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        declared = [str(name) for name in super().get_readonly_fields(request, obj)]
        return declared + [f.name for f in self.model._meta.concrete_fields if f.name not in declared]
