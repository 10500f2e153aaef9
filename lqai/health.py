"""Health checks for a load balancer or an orchestrator: unauthenticated, and saying nothing but ok or not.

- ``GET /healthz``: the process is up and answers (no database access): 200 ``{"status": "ok"}``.
- ``GET /readyz``: the database answers and every migration is applied: 200 ``{"status": "ready"}``, else 503
  ``{"status": "unavailable"}`` (why is logged, never shown).
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


def unapplied_migrations() -> int:
    """How many migrations of the installed apps the default database has not applied."""
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


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
