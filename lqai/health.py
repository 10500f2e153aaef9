"""Health checks for a load balancer or an orchestrator: unauthenticated, and saying nothing but ok or not.

- ``GET /healthz``: the process is up and answers (no database access): 200 ``{"status": "ok"}``.
- ``GET /readyz``: the database answers and every migration is applied: 200 ``{"status": "ready"}``, else 503
  ``{"status": "unavailable"}`` (why is logged, never shown).

Both are exempt from the HTTPS redirect (``SECURE_REDIRECT_EXEMPT``), so that a probe may use plain HTTP.
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


_migrated = False


def unapplied_migrations() -> int:
    """How many migrations of the installed apps the default database has not applied. Once none is, that is
    remembered for the life of the process (migrations are not unapplied under a running server; new ones come
    with new code, in a new process), so that a probe does not read the migration files every time."""
    global _migrated
    if _migrated:
        return 0
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    pending = len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    _migrated = pending == 0
    return pending


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
        pending = unapplied_migrations()
    except DatabaseError:
        logger.warning("readyz: the database is unreachable", exc_info=True)
        return JsonResponse({"status": "unavailable"}, status=503)
    if pending:
        logger.warning("readyz: %d migrations are not applied", pending)
        return JsonResponse({"status": "unavailable"}, status=503)
    return JsonResponse({"status": "ready"})
