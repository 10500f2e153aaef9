"""What the demo made: a rerun of ``manage.py demo`` replaces its previous demo matter only when it made all of it."""

from __future__ import annotations

from django.db import models


class DemoMade(models.Model):
    """A chat or message a run of the demo made in its demo matter (``demo.seed.record_made``). The next run
    purges that matter only if every chat and message in it is one of these (``demo.seed.purge_previous_run``).

    Ids, not foreign keys: the purge deletes the chats and messages, and these rows go after them."""

    project_id = models.UUIDField(help_text="The demo matter the chat or message was made in.")
    object_id = models.UUIDField(help_text="The id of a chat or message the demo made (both are UUIDs).")
    made_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "demo_made"
        constraints = [
            # A chat or message is recorded once, whatever reruns or retries record it again.
            models.UniqueConstraint(
                fields=["object_id"],
                name="demo_made_object_once",
                violation_error_message="This chat or message is already recorded as the demo's.",
            ),
        ]
        indexes = [
            # purge_previous_run reads a matter's rows, and deletes them after its purge.
            models.Index(fields=["project_id"], name="demo_made_project_idx"),
        ]

    def __str__(self) -> str:
        return f"demo made {self.object_id} in matter {self.project_id}"
