"""The chat domain: matters (projects), chats, messages, the sources a turn can
quote (knowledge-base documents and materialized caselaw opinions), and the
four per-turn tables that record what a turn quoted (KB and caselaw quotes),
consulted (tool sources) and cited (case citations).

Table names are explicit because the citation ledger, the backfill's raw SQL
and the benchmarks name them.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from django.conf import settings
from django.db import IntegrityError, connection, models, router
from django.db.models import F, Q, Value
from django.db.models.lookups import Exact
from django.utils import timezone

from chats.db_functions import JSONTypeOf
from chats.ids import uuid7
from chats.pages import opinion_pages
from chats.record import (
    FINAL_FIELDS,
    AppendOnlyError,
    AppendOnlyModel,
    AppendOnlyQuerySet,
    LegalHoldError,
    attname,
    message_change_refusal,
    naming_message_refusals,
    purge_in_progress,
)
from lqai_verify import verdict as verdict_rule
from lqai_verify.certificates import COURTS
from lqai_verify.verification import results as verification_results


def fit(model: type[models.Model], field: str, value: Any) -> Any:
    """``value`` cut to the width of ``model.field``'s column when it is a longer string: the widths of the
    columns that store what providers, tools and models send are defined once, on the fields."""
    max_length = getattr(model._meta.get_field(field), "max_length", None)
    return value[:max_length] if isinstance(value, str) and max_length is not None else value


def fit_count(model: type[models.Model], field: str, value: object) -> int | None:
    """``value`` if ``model.field``'s integer column can hold it, else None: a count a server reports (a
    model's tokens) is stored when it can be one, and never costs the turn it belongs to."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    column = model._meta.get_field(field)
    internal_type = column.get_internal_type()  # type: ignore[union-attr]  # an integer field, named by the caller
    low, high = connection.ops.integer_field_range(internal_type)
    return value if low <= value <= high else None


class CitedTextChangeError(IntegrityError):
    """A cited source's text was about to change: quotes point into it by offset, so it is immutable.

    An ``IntegrityError``, like the PostgreSQL trigger's refusal of the same change in SQL, so both
    layers give the same answer on every database. A revised text is uploaded as a new source.
    """


class CitedTextGuard(models.Model):
    """Refuses, in ``save()``, a change of ``cited_text_field`` or of one of the ``cited_fixed_fields`` once a
    quote row (``DocumentQuote``, ``OpinionQuote``) quotes the source (``citations`` is the reverse relation of
    the quote rows): what the record shows of a cited source (its matter, its title, its pages; an opinion's
    provider, case name and citation) is what its quotes were verified and sealed with, and the signed export
    shows it. Other columns (an opinion's court, date, URL, retrieval time) may still be refreshed.

    ``QuerySet.update()`` and ``bulk_update()`` bypass ``save()``: :class:`CitedSourceQuerySet` refuses the same
    there. On PostgreSQL the triggers of the migrations ``0007_cited_text_immutable``, ``0014_permanent_record``,
    ``0029_cited_opinion_provider_fixed`` and ``0031_cited_source_fixed`` refuse it below the application too
    (raw SQL included); on SQLite only the model layer holds.
    """

    cited_text_field: ClassVar[str]
    cited_fixed_fields: ClassVar[tuple[str, ...]] = ()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        deferred = self.get_deferred_fields()
        guarded = {
            attname(type(self), name): getattr(self, attname(type(self), name))
            for name in self.cited_guarded_fields()
            if name not in deferred and (update_fields is None or name in update_fields)
        }
        if not self._state.adding and guarded:
            stored = type(self)._base_manager.using(kwargs.get("using") or self._state.db).filter(pk=self.pk)
            _refuse_cited_change(stored, guarded)
        super().save(*args, **kwargs)

    @classmethod
    def cited_guarded_fields(cls) -> tuple[str, ...]:
        """The fields a cited source keeps: its text and its ``cited_fixed_fields``."""
        return (cls.cited_text_field, *cls.cited_fixed_fields)

    def is_cited(self) -> bool:
        """Whether a quote row quotes this source (its text and ``cited_fixed_fields`` are then fixed)."""
        return self.pk is not None and not self._state.adding and self.citations.exists()  # type: ignore[attr-defined]


def _refuse_cited_change(rows: models.QuerySet[Any], values: dict[str, Any]) -> None:
    """Raise :class:`CitedTextChangeError` if writing ``values`` (column values, or expressions, by attname)
    to ``rows`` would change a guarded column of one of them that is cited, naming the columns that would
    change. Compared in the database (``exclude``), as the trigger compares: a JSON value or an expression
    is equal there when it stores the same."""
    cited = rows.filter(citations__isnull=False)
    # One query whatever the columns: the cited rows that keep every value are excluded (a row differing in
    # any column remains). Only on a refusal are the columns looked at one by one, to name them.
    pk = cited.exclude(**values).values_list("pk", flat=True).first()
    if pk is None:
        return
    cited = cited.filter(pk=pk)
    changed = [name for name, value in values.items() if cited.exclude(**{name: value}).exists()]
    model = rows.model._meta
    names = " and ".join(model.get_field(name).name for name in changed)
    raise CitedTextChangeError(
        f"{model.verbose_name} {pk} is cited: its {names} cannot change "
        f"(a revised source is added as a new {model.verbose_name})."
    )


class CitedSourceQuerySet(models.QuerySet[Any]):
    """A cited source's queryset: ``update()`` (and so ``bulk_update()``) of a guarded field (see
    :class:`CitedTextGuard`) is refused when it would change that field of a cited row, as ``save()`` and the
    PostgreSQL triggers refuse it; uncited rows and the other fields update freely."""

    def update(self, **kwargs: Any) -> int:
        guarded = {attname(self.model, name) for name in self.model.cited_guarded_fields()}
        values = {attname(self.model, name): value for name, value in kwargs.items()}
        values = {name: value for name, value in values.items() if name in guarded}
        if values:
            _refuse_cited_change(self, values)
        return super().update(**kwargs)


def _refuse_deletion(*, what: str, projects: models.QuerySet[Project], messages: models.QuerySet[Message]) -> None:
    """Refuse deleting ``what`` if one of the ``projects`` it belongs to is on legal hold, or, outside a
    matter purge, if it holds any of ``messages`` (the permanent record: see ``chats.record``)."""
    held = projects.filter(legal_hold=True).values_list("pk", flat=True).first()
    if held is not None:
        raise LegalHoldError(f"matter {held} is on legal hold: {what} cannot be deleted")
    if purge_in_progress() is None and messages.exists():
        raise AppendOnlyError(
            f"{what} holds chat turns, which are permanent: only `manage.py purge_matter` removes a matter's record"
        )


class ProjectQuerySet(models.QuerySet["Project"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        _refuse_deletion(what="these matters", projects=self, messages=Message.objects.filter(chat__project__in=self))
        return super().delete()


class Project(models.Model):
    """A matter: the unit of access control. Its owner and members see its chats.

    Its owner is protected (a user who owns a matter cannot be deleted: deactivate them instead), so
    that no matter, and no record of its turns, ever goes with a user. While ``legal_hold`` is set,
    neither the matter nor its chats or messages can be deleted (refused by the database too)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_projects")
    # Everyone in the matter besides its owner, each with a role (``ProjectMembership``).
    members: models.ManyToManyField[Any, ProjectMembership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="projects", blank=True, through="ProjectMembership"
    )
    legal_hold = models.BooleanField(
        default=False,
        db_default=False,
        help_text="While on hold, neither the matter nor its chats or messages can be deleted.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The court whose certification its certificates of verification use (a key of
    # ``lqai_verify.certificates.COURTS``), and the assigned judge's own wording, added by the owner
    # (``chats.matters.set_certificate_wording``). A certificate copies both into its sealed text when issued.
    certificate_court = models.CharField(max_length=32, default="default", db_default="default")
    judge_wording = models.TextField(blank=True, default="", db_default="")

    objects = ProjectQuerySet.as_manager()

    class Meta:
        db_table = "projects"
        ordering = ["name"]
        constraints = [
            # A matter needs a name a lawyer can recognise in a list.
            models.CheckConstraint(
                condition=~Q(name=""), name="projects_name_not_empty", violation_error_message="A project needs a name."
            ),
            # A certificate is worded by a court's template the code holds.
            models.CheckConstraint(
                condition=Q(certificate_court__in=sorted(COURTS)),
                name="projects_certificate_court_known",
                violation_error_message="The court is one whose certificate template lqai holds.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        _refuse_deletion(
            what=f"matter {self.pk}",
            projects=Project.objects.filter(pk=self.pk),
            messages=Message.objects.filter(chat__project=self.pk),
        )
        return super().delete(*args, **kwargs)


class Role(models.TextChoices):
    """A person's role in a matter. The owner is ``Project.owner`` (one per matter); a membership is a
    reviewer's or a member's. Owner and reviewers record review decisions; members read and ask."""

    OWNER = "owner", "owner"
    REVIEWER = "reviewer", "reviewer"
    MEMBER = "member", "member"


# The roles that record review decisions on a matter's claims.
DECIDING_ROLES = (Role.OWNER, Role.REVIEWER)


class ProjectMembership(models.Model):
    """One person's membership of a matter, with her role (reviewer or member; the owner is the matter's
    ``owner``, not a membership). Written by ``chats.matters.set_member_role``, ``add_member`` and
    ``remove_member`` only."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER, db_default=Role.MEMBER)

    class Meta:
        db_table = "project_members"
        unique_together = [("project", "user")]
        constraints = [
            # The owner's role is the matter's owner field: a membership row is a reviewer's or a member's.
            models.CheckConstraint(
                condition=Q(role__in=[Role.REVIEWER, Role.MEMBER]),
                name="project_members_role_known",
                violation_error_message="A member's role is reviewer or member (the owner is the matter's owner).",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.project_id} as {self.role}"


def _refuse_move(chats: models.QuerySet[Chat], project: Any) -> None:
    """Refuse giving ``chats`` the matter ``project`` (a ``Project``, its id or ``None``) if one of them that
    would change matter holds turns: a turn's matter is sealed with it (see ``chats.0028``)."""
    moved = chats.exclude(project_id=getattr(project, "pk", project))
    holding = Message.objects.filter(chat__in=moved).values_list("chat_id", flat=True).first()
    if holding is not None:
        raise AppendOnlyError(
            f"chat {holding} holds turns: its matter cannot change (its turns are sealed in its matter's chain; "
            "start a new chat in the other matter)"
        )


class ChatQuerySet(models.QuerySet["Chat"]):
    def update(self, **kwargs: Any) -> int:
        for name in ("project", "project_id"):
            if name in kwargs:
                _refuse_move(self, kwargs[name])
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        _refuse_deletion(
            what="these chats",
            projects=Project.objects.filter(chats__in=self),
            messages=Message.objects.filter(chat__in=self),
        )
        return super().delete()


class Chat(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # A chat may be matter-less; deleting a matter deletes its chats (and, by
    # cascade, their messages, artifacts and ledger entries).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="chats")
    # Protected like the matter's owner: a user who opened chats is deactivated, never deleted with them.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="chats")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = ChatQuerySet.as_manager()

    class Meta:
        db_table = "chats"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title or f"Chat {self.id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if not self._state.adding and (update_fields is None or {"project", "project_id"} & set(update_fields)):
            _refuse_move(
                Chat._base_manager.using(kwargs.get("using") or self._state.db).filter(pk=self.pk), self.project_id
            )
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        _refuse_deletion(
            what=f"chat {self.pk}",
            projects=Project.objects.filter(chats=self.pk),
            messages=Message.objects.filter(chat=self.pk),
        )
        return super().delete(*args, **kwargs)


class Verdict(models.TextChoices):
    """A finalized turn's verdict over its claims (the rule: ``lqai_verify.verdict``), one meaning per colour. A
    turn resumed after an interruption keeps the worse of its verdicts (``Verdict.worst``). ``supported`` is the
    verdict earlier rules gave: valid on the turns sealed with it, never written by a finalize today."""

    NONE = verdict_rule.NONE, "none (no claim)"
    PASS = verdict_rule.PASS, "pass (every quote and case cited verified)"
    REVIEW = verdict_rule.REVIEW, "review (nothing failed, but a claim needs a person)"
    FAIL = verdict_rule.FAIL, "fail (a claim failed: not in its source, or a case cited wrong)"
    SUPPORTED = verdict_rule.SUPPORTED, "supported (earlier rules: all verified, some tolerant or altered)"

    @classmethod
    def worst(cls, *verdicts: str | None) -> str:
        return verdict_rule.worst(*verdicts)


def _stored_messages(queryset: models.QuerySet[Message]) -> list[dict[str, Any]]:
    return list(queryset.filter(finalized_at__isnull=False).values("id", *FINAL_FIELDS))


class MessageQuerySet(models.QuerySet["Message"]):
    """Refuses, on every database, what the messages trigger refuses in PostgreSQL: an update rewriting a
    finalized message (``chats.record.message_change_refusal``), and a delete outside a matter purge."""

    def update(self, **kwargs: Any) -> int:
        new = {attname(self.model, name): value for name, value in kwargs.items()}
        if set(new) & set(FINAL_FIELDS):
            for old in _stored_messages(self):
                # An expression (F("attempt") + 1) is not compared: only a complete or failed row refuses it.
                values = {k: v for k, v in new.items() if not hasattr(v, "resolve_expression")}
                expressions = [k for k in new if k not in values and k in FINAL_FIELDS]
                why = message_change_refusal(old, values)
                if why is None and expressions and old["status"] in ("complete", "failed"):
                    why = f"message {old['id']} is {old['status']}: its {', '.join(expressions)} cannot change"
                if why is not None:
                    raise AppendOnlyError(why)
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        _refuse_deletion(what="messages", projects=Project.objects.filter(chats__messages__in=self), messages=self)
        return super().delete()


class MessageRole(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"


class MessageKind(models.TextChoices):
    """What a turn is: an assistant's answer to a question, or a lawyer's draft checked (``drafts``), whose text
    stands as the answer and whose author is the user."""

    ANSWER = "answer"
    DRAFT = "draft"


class MessageStatus(models.TextChoices):
    PENDING = "pending"
    STREAMING = "streaming"
    INTERRUPTED = "interrupted"
    COMPLETE = "complete"
    FAILED = "failed"


class Message(models.Model):
    # Module-level enumerations (so that Meta's constraints can name them too), reachable as Message.Role/Status.
    Role = MessageRole
    Status = MessageStatus
    Kind = MessageKind

    # Time-ordered (chats.ids), as for every row a turn writes: two per turn, and the ledger's message_id
    # index holds them too, so random keys would cost a cold page per insert there as well.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Who asked: set on a turn's user message and its answer; per-user limits count by it. Null for
    # turns stored before it existed. Protected: a finalized turn's author never changes (the permanent
    # record), so a user who asked is deactivated, never deleted. No index of its own:
    # messages_author_status_idx starts with it.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    finalized_at = models.DateTimeField(null=True, blank=True)
    # The gate verdict of a finalized assistant turn over the quotes it claimed (see ``Verdict``).
    verdict = models.CharField(max_length=16, choices=Verdict.choices, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The user message an assistant message answers: its turn's question, whatever else was posted
    # to the chat meanwhile. Null for user messages, and for turns stored before it existed. An
    # answer without its question means nothing, so it goes with it. Indexed by the unique constraint.
    reply_to = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="replies", db_index=False
    )
    # The turn's last sign of life: set when it starts, touched while it streams, set at finalize. A
    # `pending`/`streaming` turn whose progress stopped (a killed worker) is resumable after a while.
    updated_at = models.DateTimeField(default=timezone.now)
    # Usage of a model-backed answer (all empty for the offline backends and for user messages):
    # the model that answered, the tokens it was sent and produced over all of the turn's requests,
    # and the time spent waiting on it. db_default: rows inserted in raw SQL (benchmark data) have none.
    model_name = models.CharField(max_length=200, blank=True, default="", db_default="")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    # The claim of the run writing the answer: 1 from ``start_turn``, one more at each resume (a conditional
    # update), so that only the current run may finalize; a superseded run's late finalize writes nothing.
    # 0 on user messages and on answers stored before it existed.
    attempt = models.PositiveIntegerField(default=0, db_default=0)
    # The turn's kind, on both of its messages: an answer, or a checked draft (its question names the file). Not in
    # the sealed facts (their format would change for every turn sealed before it); the draft's question is.
    kind = models.CharField(max_length=16, choices=MessageKind.choices, default=MessageKind.ANSWER, db_default="answer")

    objects = MessageQuerySet.as_manager()

    class Meta:
        db_table = "messages"
        ordering = ["created_at", "id"]
        indexes = [
            # The per-user cap on concurrent streams counts a user's `streaming` answers (chats.selectors).
            models.Index(fields=["author", "status", "updated_at"], name="messages_author_status_idx"),
            # The chat views list a chat's messages in order; the backfill's
            # --chat filter walks one chat's messages in creation order.
            models.Index(fields=["chat", "created_at"], name="messages_chat_created_idx"),
            # The ledger backfill walks messages in creation order, keyset-paginated on (created_at, id).
            models.Index(fields=["created_at", "id"], name="messages_created_idx"),
            # ``manage.py seal_turns`` walks the finalized answers in finalize order, keyset-paginated on
            # (finalized_at, id): each batch reads its own turns, not every turn sealed before it.
            models.Index(
                fields=["finalized_at", "id"],
                name="messages_finalized_idx",
                condition=Q(role=MessageRole.ASSISTANT, finalized_at__isnull=False),
            ),
            # ``manage.py end_stopped_turns`` (cron) reads the unfinished answers, oldest progress first
            # (chats.selectors.stopped_turns): a few rows among every message ever written.
            models.Index(
                fields=["updated_at", "id"],
                name="messages_unfinished_idx",
                condition=Q(status__in=[MessageStatus.PENDING, MessageStatus.STREAMING]),
            ),
        ]
        constraints = [
            # Only the two speakers of a turn exist; anything else is a bug upstream.
            models.CheckConstraint(
                condition=Q(role__in=MessageRole.values),
                name="messages_role_valid",
                violation_error_message="Role must be 'user' or 'assistant'.",
            ),
            # The turn lifecycle is closed: an unknown status would be invisible to every view.
            models.CheckConstraint(
                condition=Q(status__in=MessageStatus.values),
                name="messages_status_valid",
                violation_error_message=f"Status must be one of {', '.join(MessageStatus.values)}.",
            ),
            # A verdict is one the rule gives (or ``supported``, of earlier rules), and only a finalized assistant
            # turn has one.
            models.CheckConstraint(
                condition=Q(verdict__isnull=True)
                | Q(verdict__in=Verdict.values, role=MessageRole.ASSISTANT, finalized_at__isnull=False),
                name="messages_verdict_valid",
                violation_error_message="A verdict is one of pass, review, fail, none (or supported, of earlier "
                "rules), on a finalized turn.",
            ),
            # Only an answer answers something: a user message replying to another would be a second question.
            models.CheckConstraint(
                condition=Q(reply_to__isnull=True) | Q(role=MessageRole.ASSISTANT),
                name="messages_reply_to_only_assistant",
                violation_error_message="Only an assistant message can reply to a message.",
            ),
            # One answer per question (a resume continues the same answer): two would race for one turn.
            models.UniqueConstraint(
                fields=["reply_to"],
                name="messages_reply_to_uniq",
                violation_error_message="This question already has an answer.",
            ),
            # A kind no reader knows would show a draft as an answer or the reverse.
            models.CheckConstraint(
                condition=Q(kind__in=MessageKind.values),
                name="messages_kind_valid",
                violation_error_message="Kind must be 'answer' or 'draft'.",
            ),
            # Usage is what a model spent answering: a user's message has none.
            models.CheckConstraint(
                condition=Q(role=MessageRole.ASSISTANT)
                | Q(model_name="", prompt_tokens__isnull=True, completion_tokens__isnull=True, latency_ms__isnull=True),
                name="messages_usage_only_on_assistant",
                violation_error_message="Only an assistant message records model usage.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} message {self.id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The database refuses rewriting a finalized message (its trigger, chats.0014 and 0034): said plainly.
        with naming_message_refusals(kwargs.get("using") or router.db_for_write(Message, instance=self)):
            super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        _refuse_deletion(
            what=f"message {self.pk}",
            projects=Project.objects.filter(chats__messages=self.pk),
            messages=Message.objects.filter(pk=self.pk),
        )
        return super().delete(*args, **kwargs)


class Document(CitedTextGuard):
    """A knowledge-base document of a matter; quotes are verified against ``content``, which is
    immutable once quoted, like its matter, title and pages (:class:`CitedTextGuard`; a revised document is
    uploaded as a new document)."""

    cited_text_field = "content"
    # A cited document stays in its matter (another matter's chats must not quote it), and keeps the title and
    # the pages its quotes are shown with (the trace, the signed export and its report).
    cited_fixed_fields = ("project", "title", "pages")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    content = models.TextField()
    # Where each page of the content starts, as ``[start, label]`` pairs (``chats.pages``): set for an uploaded
    # PDF, so that a quote reports its pages; empty for a text without pages (also the database default).
    pages = models.JSONField(blank=True, default=list, db_default=Value([], models.JSONField()))
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # Hex SHA-256 of the content its passages (DocumentPassage) were made from; empty while they are to be
    # made: a document inserted in bulk or in SQL, or one whose content or matter changed outside the document
    # services (chats.documents; a trigger of migrations chats.0020 and 0030 empties it then). Retrieval makes
    # them on first use (chats.passages).
    passages_sha256 = models.CharField(max_length=64, blank=True, default="", db_default="", editable=False)
    # Whether the words of its passages are in its matter's counts (MatterTerm): false from when its passages
    # are made until the matter's words are next counted, once for every document added since
    # (chats.passages.count_terms), so that adding a document never updates counts others just updated.
    terms_counted = models.BooleanField(default=False, db_default=False, editable=False)

    objects = CitedSourceQuerySet.as_manager()

    class Meta:
        db_table = "documents"
        ordering = ["title"]
        constraints = [
            # The API and the trace read the pages as a list of pairs; anything else cannot be shown.
            models.CheckConstraint(
                condition=Exact(JSONTypeOf("pages"), Value("array")),
                name="documents_pages_array",
                violation_error_message="pages must be a JSON array.",
            ),
        ]
        indexes = [
            # Retrieval looks for a matter's documents without passages or whose words are not counted yet on
            # every turn (chats.passages.ensure_passages): this partial index holds only those, so the look-up
            # costs nothing once they are made and counted.
            models.Index(
                fields=["project"],
                condition=Q(passages_sha256="") | Q(terms_counted=False),
                name="documents_passages_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.title


class DocumentPassage(models.Model):
    """A quotable passage of a KB document (``chats.retrieval.passages``): ``document.content[start:end] ==
    text``. Made once per content (``chats.passages.make_passages``) and searched through a full-text index
    on PostgreSQL (the ``search_vector`` column of migration chats.0020 and the GIN index on ``(project_id,
    search_vector)`` of chats.0027, which the model state leaves out to stay backend-neutral), so that a
    turn's retrieval does not read and split every document of its matter, nor read other matters'
    passages."""

    id = models.BigAutoField(primary_key=True)
    # Indexed: a document's passages are replaced and deleted by document.
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="passages")
    # The document's matter, copied: a matter's passages are searched with no join, and a distributed
    # database keeps them on the matter's node with its documents (docs/scale.md). Indexed by the unique
    # constraint below.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    # The passage's place in its document, from 0.
    position = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    text = models.TextField()

    class Meta:
        db_table = "document_passages"
        ordering = ["document", "position"]
        constraints = [
            # A passage is made once per content: two making it at once cannot both insert it. The matter
            # first: a small matter's search reads its passages through this index (the planner's choice by
            # size), and a database distributed by matter requires it in every unique key (docs/scale.md).
            models.UniqueConstraint(
                fields=["project", "document", "position"],
                name="document_passages_position_uniq",
                violation_error_message="A document has one passage at each position.",
            ),
            # A passage is a non-empty span of its document.
            models.CheckConstraint(
                condition=Q(start__lt=models.F("end")),
                name="document_passages_span_not_empty",
                violation_error_message="A passage's start must be before its end.",
            ),
        ]

    def __str__(self) -> str:
        return f"passage {self.position} of {self.document_id}"


class MatterTerm(models.Model):
    """How many of a matter's passages hold a word (a lexeme of PostgreSQL's ``english`` configuration):
    the search picks a question's rarer words to choose its candidate passages from, so that a common
    word in a large matter does not make it rank every passage (``chats.passages``). Kept on PostgreSQL by
    ``count_terms`` (the words of the documents added since it last ran) and ``make_passages`` (those of a
    replaced content counted off); counts of a deleted document's passages stay: an over-count, which only
    makes a word look commoner. Unused elsewhere."""

    id = models.BigAutoField(primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    lexeme = models.TextField()
    passages = models.IntegerField()

    class Meta:
        db_table = "matter_terms"
        constraints = [
            # One count per word and matter (the upsert of make_passages); also the search's look-up index.
            models.UniqueConstraint(fields=["project", "lexeme"], name="matter_terms_project_lexeme_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.lexeme}: {self.passages}"


class CaselawOpinion(CitedTextGuard):
    """External opinion text, materialized so that quotes from it stay verifiable later: once quoted, its
    ``text`` and ``cited_fixed_fields`` are fixed (:class:`CitedTextGuard`); its court, date, URL and
    retrieval time may still be refreshed."""

    cited_text_field = "text"
    # Its provider is one of its quotes' sealed facts; its case name, citation (the source's title in the
    # export) and pages (a quote's pin cite) are what the trace, the signed export and its report show of it.
    cited_fixed_fields = ("provider", "case_name", "citation", "pages")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    provider = models.CharField(max_length=50)
    cluster_id = models.CharField(max_length=100, blank=True)
    opinion_id = models.CharField(max_length=100)
    case_name = models.CharField(max_length=500)
    citation = models.CharField(max_length=200, blank=True)
    # Every citation of the case, ``citation`` (the reporter whose pages the star paging gives) first, as the
    # provider lists them: ["380 U.S. 102", "85 S. Ct. 741", "13 L. Ed. 2d 684"]; empty when not known.
    parallel_citations = models.JSONField(blank=True, default=list, db_default=Value([], models.JSONField()))
    court = models.CharField(max_length=200, blank=True)
    date_filed = models.DateField(null=True, blank=True)
    absolute_url = models.URLField(max_length=500, blank=True)
    text = models.TextField()
    # The reporter's pages of the text, from its star paging (``*1047``), as ``[start, label]`` pairs
    # (``chats.pages``); set by save() from the text and the citation; empty when the text has no star paging.
    pages = models.JSONField(blank=True, default=list, db_default=Value([], models.JSONField()))
    retrieved_at = models.DateTimeField(default=timezone.now)

    objects = CitedSourceQuerySet.as_manager()

    class Meta:
        db_table = "caselaw_opinions"
        ordering = ["case_name"]
        constraints = [
            # The API and the trace read the pages as a list of pairs; anything else cannot be shown.
            models.CheckConstraint(
                condition=Exact(JSONTypeOf("pages"), Value("array")),
                name="caselaw_opinions_pages_array",
                violation_error_message="pages must be a JSON array.",
            ),
            # The API and the loaders read the parallel citations as a list of strings.
            models.CheckConstraint(
                condition=Exact(JSONTypeOf("parallel_citations"), Value("array")),
                name="caselaw_opinions_parallel_citations_array",
                violation_error_message="parallel_citations must be a JSON array.",
            ),
            # One materialized copy per provider opinion: re-fetching updates, never duplicates.
            models.UniqueConstraint(
                fields=["provider", "opinion_id"],
                name="caselaw_opinions_provider_opinion_uniq",
                violation_error_message="This provider's opinion is already materialized.",
            ),
        ]

    def __str__(self) -> str:
        return self.case_name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Saves, with ``pages`` computed from the text (``chats.pages.opinion_pages``) when the text is saved."""
        update_fields = kwargs.get("update_fields")
        if "text" not in self.get_deferred_fields() and (update_fields is None or "text" in update_fields):
            self.pages = opinion_pages(self.text, citation=self.citation)
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "pages"}
        super().save(*args, **kwargs)


class VerificationMethod(models.TextChoices):
    """How a claimed quote fared against its source (``lqai_verify.verification``, whose names these are); the
    ledger copies it as the entry's status. ``exact_match``: the characters match and nothing next to the
    passage limits it; ``tolerant_match``: formatting only, and alterations that cannot change the meaning;
    ``altered``: found, but an alteration, an omission or the quote's edges may change what the source says
    (confidence at most ``ALTERED_MAX_CONFIDENCE``, the turn at best ``review``); ``unverified``: the
    claim did not hold (or named no source this turn may quote); ``unchecked``: nothing could check the quotation
    (a draft's quotation with no citation, or citing a case nothing resolved): no source, the reason saying what
    would check it, the turn at best ``review``."""

    EXACT_MATCH = verification_results.EXACT_MATCH
    TOLERANT_MATCH = verification_results.TOLERANT_MATCH
    ALTERED = verification_results.ALTERED
    UNVERIFIED = "unverified"
    UNCHECKED = "unchecked"


UNVERIFIED = VerificationMethod.UNVERIFIED.value
UNCHECKED = VerificationMethod.UNCHECKED.value
VERIFIED_METHODS = (
    VerificationMethod.EXACT_MATCH.value,
    VerificationMethod.TOLERANT_MATCH.value,
    VerificationMethod.ALTERED.value,
)
#: The highest confidence an ``altered`` quote may have (``lqai_verify.verification.ALTERED_MAX_CONFIDENCE``).
ALTERED_MAX_CONFIDENCE = 0.6


def _quote_constraints(table: str, source: str) -> list[models.BaseConstraint]:
    """The rules shared by both quote tables. A verified quote is a real, ordered span of its source with a
    confidence in 0..1; a failed claim has no span, no confidence and a reason, and may name no source; a
    quotation nothing could check has no source, no span, no confidence and a reason.
    Every row has a shape the citation ledger can hold."""
    # Not failed, not unchecked (an unknown method is ``<table>_method_known``'s to refuse).
    verified = ~Q(verification_method__in=[UNVERIFIED, UNCHECKED])
    return [
        # Offsets index into the source text: negative offsets cannot point anywhere.
        models.CheckConstraint(
            condition=Q(source_offset_start__isnull=True) | Q(source_offset_start__gte=0),
            name=f"{table}_offset_start_non_negative",
            violation_error_message="source_offset_start must be >= 0.",
        ),
        # source[start:end] must be a forward span, or the passage cannot be read back.
        models.CheckConstraint(
            condition=Q(source_offset_start__isnull=True)
            | Q(source_offset_end__isnull=True)
            | Q(source_offset_end__gte=models.F("source_offset_start")),
            name=f"{table}_offsets_ordered",
            violation_error_message="source_offset_end must be >= source_offset_start.",
        ),
        # The digest is a hex SHA-256 of the passage, or empty for a quote stored before digests existed.
        models.CheckConstraint(
            condition=Q(passage_sha256__regex=r"^([0-9a-f]{64})?$"),
            name=f"{table}_passage_sha256_hex",
            violation_error_message="passage_sha256 must be 64 lowercase hex digits (or empty).",
        ),
        # A stored claim says how it fared, by a method the ledger and the reviewers know.
        models.CheckConstraint(
            condition=Q(verification_method__in=VerificationMethod.values),
            name=f"{table}_method_known",
            violation_error_message="verification_method must be one of: " + ", ".join(VerificationMethod.values) + ".",
        ),
        # Confidence is a probability-like score; outside 0..1 it means nothing.
        models.CheckConstraint(
            condition=Q(verification_confidence__isnull=True)
            | (Q(verification_confidence__gte=0) & Q(verification_confidence__lte=1)),
            name=f"{table}_confidence_range",
            violation_error_message="verification_confidence must be within 0..1.",
        ),
        # A verified quote has its source, span and confidence and no failure reason; a failed claim has no
        # span, no confidence and no digest (nothing was found) and says why it failed; a quotation nothing could
        # check has no source either (there was none to check it against) and says what would check it.
        models.CheckConstraint(
            condition=(
                verified
                & Q(**{f"{source}__isnull": False})
                & Q(source_offset_start__isnull=False, source_offset_end__isnull=False)
                & Q(verification_confidence__isnull=False)
                & Q(unverified_reason="")
            )
            | (
                Q(verification_method=UNVERIFIED)
                & Q(source_offset_start__isnull=True, source_offset_end__isnull=True)
                & Q(verification_confidence__isnull=True)
                & Q(passage_sha256="")
                & ~Q(unverified_reason="")
            )
            | (
                Q(verification_method=UNCHECKED)
                & Q(**{f"{source}__isnull": True})
                & Q(source_offset_start__isnull=True, source_offset_end__isnull=True)
                & Q(verification_confidence__isnull=True)
                & Q(passage_sha256="")
                & ~Q(unverified_reason="")
            ),
            name=f"{table}_verified_or_failed_shape",
            violation_error_message="A verified quote needs its source, offsets and confidence and no reason; "
            "an unverified one has no offsets and no confidence, and a reason; an unchecked one has no source, "
            "no offsets and no confidence, and a reason.",
        ),
        # A claim is placed in the answer by a whole span (and then needs no reason), or not at all.
        models.CheckConstraint(
            condition=Q(answer_offset_start__isnull=True, answer_offset_end__isnull=True)
            | (
                Q(answer_offset_start__isnull=False, answer_offset_end__isnull=False)
                & Q(answer_offset_end__gte=F("answer_offset_start"))
                & Q(answer_unplaced_reason="")
            ),
            name=f"{table}_answer_span_shape",
            violation_error_message="A claim's answer span has both ends (start <= end) and no reason, or neither.",
        ),
        *_quote_alteration_constraints(table),
    ]


def _quote_alteration_constraints(table: str) -> list[models.BaseConstraint]:
    """The rules of a quote row's alterations and context flags: lists, listed only where the match is tolerant
    or altered, and an altered quote scored below what the verifier vouches for."""
    return [
        # The admin and the trace iterate the alterations: anything but a list cannot be shown.
        models.CheckConstraint(
            condition=Exact(JSONTypeOf("alterations"), Value("array")),
            name=f"{table}_alterations_array",
            violation_error_message="alterations must be a JSON array.",
        ),
        # An exact quote altered nothing and a failed claim matched nothing: only a tolerant or altered match
        # lists any.
        models.CheckConstraint(
            condition=Q(verification_method__in=[VerificationMethod.TOLERANT_MATCH, VerificationMethod.ALTERED])
            | Q(alterations=[]),
            name=f"{table}_alterations_only_tolerant",
            violation_error_message="Only a tolerant or altered match has alterations.",
        ),
        # What the verifier cannot vouch for is never scored like what it can.
        models.CheckConstraint(
            condition=~Q(verification_method=VerificationMethod.ALTERED)
            | Q(verification_confidence__lte=ALTERED_MAX_CONFIDENCE),
            name=f"{table}_altered_confidence_capped",
            violation_error_message=f"An altered quote's confidence must be at most {ALTERED_MAX_CONFIDENCE}.",
        ),
        # The admin and the trace iterate the context flags: anything but a list cannot be shown.
        models.CheckConstraint(
            condition=Exact(JSONTypeOf("context_flags"), Value("array")),
            name=f"{table}_context_flags_array",
            violation_error_message="context_flags must be a JSON array.",
        ),
        # A flagged edge means the passage may mislead: such a quote is altered, never exact or tolerant.
        models.CheckConstraint(
            condition=Q(verification_method=VerificationMethod.ALTERED) | Q(context_flags=[]),
            name=f"{table}_context_flags_only_altered",
            violation_error_message="Only an altered match has context flags.",
        ),
    ]


class ClaimedQuote(AppendOnlyModel):
    """What both quote tables record of a claimed quote: the quote, how it fared against its source and, when
    it verified, where it is in the source (``source[start:end]``), a digest of that passage and its
    alterations. Each table adds the message and its own kind of source."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    quote = models.TextField()
    source_offset_start = models.IntegerField(null=True, blank=True)
    source_offset_end = models.IntegerField(null=True, blank=True)
    verification_method = models.CharField(max_length=32, choices=VerificationMethod.choices)
    verification_confidence = models.FloatField(null=True, blank=True)
    # Why a claim is unverified ("not found in the document", ...) or unchecked ("no citation supports this
    # quotation", ...); empty for a verified quote (also the
    # database default, for raw SQL writers).
    unverified_reason = models.CharField(max_length=300, blank=True, default="", db_default="")
    # Hex SHA-256 of source[start:end] (UTF-8) as verified at finalize: a digest, never content. The trace
    # recomputes it from the passage it reads, so a change of the text below the application shows.
    # Empty for quotes stored before it was recorded (also the database default, for raw SQL writers).
    passage_sha256 = models.CharField(max_length=64, blank=True, default="", db_default="")
    # Each alteration and omission of a tolerant match, in quote order, as ``lqai_verify.verification`` found it:
    # {"kind", "detail", "quote_text", "source_start", "source_end"} (offsets into the source, like the
    # passage's). Empty for an exact match and a failed claim (also the database default, for raw SQL writers).
    alterations = models.JSONField(blank=True, default=list, db_default=Value([], models.JSONField()))
    # What the source says right next to the passage that may limit it, as ``lqai_verify.verification`` found it:
    # {"flag", "source_start", "source_end"} (the limiting source text; flags in ``lqai_verify.verification``:
    # ``limited_after``, ``negated_before``, ``limited_before``). Only an ``altered`` match has any (also the
    # database default, for raw SQL writers).
    context_flags = models.JSONField(blank=True, default=list, db_default=Value([], models.JSONField()))
    # The claim's place among the claims its turn made (KB and caselaw claims numbered together; a resumed
    # turn's go on from its first run's), so that a turn's quotes read in the order it claimed them. 0 for
    # rows from before it was recorded (also the database default, for raw SQL writers).
    position = models.PositiveIntegerField(default=0, db_default=0)
    # Where the claim stands in the answer text (``answer[start:end]``, like a case citation's offsets), found
    # at finalize (chats.answer_positions); null when it cannot be placed, ``answer_unplaced_reason`` saying
    # why. Null with no reason for rows stored before positions were recorded (also the database default).
    answer_offset_start = models.PositiveIntegerField(null=True, blank=True)
    answer_offset_end = models.PositiveIntegerField(null=True, blank=True)
    answer_unplaced_reason = models.CharField(max_length=200, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    # Append-only (chats.record): written with the turn, never updated, deleted only by a matter purge.
    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True
        # A turn's rows share created_at (a resumed turn's later ones have a later one): then claim order.
        ordering = ["created_at", "position", "id"]


class DocumentQuote(ClaimedQuote):
    """A quote claimed from a KB document: verified against the document's content, or recorded as failed."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="citations")
    # A cited document cannot be deleted on its own (the citation would become unverifiable); it goes only
    # together with the citing turn or matter. Empty only for a failed claim naming no document of the matter.
    document = models.ForeignKey(Document, on_delete=models.RESTRICT, null=True, blank=True, related_name="citations")

    class Meta(ClaimedQuote.Meta):
        db_table = "message_citations"
        constraints = _quote_constraints("message_citations", "document")

    def __str__(self) -> str:
        return f"KB quote {self.id}"


class OpinionQuote(ClaimedQuote):
    """A quote claimed from a materialized caselaw opinion: verified against its text, or recorded as failed."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="caselaw_citations")
    # Empty only for a failed claim naming no known opinion.
    opinion = models.ForeignKey(
        CaselawOpinion, on_delete=models.RESTRICT, null=True, blank=True, related_name="citations"
    )

    class Meta(ClaimedQuote.Meta):
        db_table = "message_caselaw_citations"
        constraints = _quote_constraints("message_caselaw_citations", "opinion")

    def __str__(self) -> str:
        return f"Caselaw quote {self.id}"


class SourceKind(models.TextChoices):
    """What a source is: a matter's KB document, a caselaw opinion, or a resource of an MCP tool. The ledger's
    ``source_kind`` and the API's ``kind`` name these; a tool may report a kind of its own (the column is open)."""

    KB_DOCUMENT = "kb_document", "KB document"
    CASELAW = "caselaw", "Caselaw"
    MCP = "mcp", "MCP tool"
    STATUTE = "statute", "Statute or regulation"


class MessageToolSource(AppendOnlyModel):
    """A source a tool consulted during the turn ("sources consulted"): provenance, not a quote."""

    SourceKind = SourceKind

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_sources")
    # Extensible on purpose: new tool kinds flow into the ledger with no schema change.
    source_kind = models.CharField(max_length=32)
    tool = models.CharField(max_length=100)
    provider = models.CharField(max_length=50, null=True, blank=True)  # noqa: DJ001 - null means "no provider"
    label = models.CharField(max_length=500)
    subtitle = models.CharField(max_length=500, blank=True)
    url = models.URLField(max_length=500, blank=True)
    external_ref = models.CharField(max_length=200, blank=True)
    # The source's place among those the turn's tools consulted, in the order they reported them (a resumed
    # turn's go on from its first run's). 0 for rows from before it was recorded (also the database default,
    # for raw SQL writers).
    position = models.PositiveIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = AppendOnlyQuerySet.as_manager()  # append-only: see chats.record

    class Meta:
        db_table = "message_tool_sources"
        ordering = ["created_at", "position", "id"]
        constraints = [
            # The ledger copies source_kind; an empty kind would be an unclassifiable entry.
            models.CheckConstraint(
                condition=~Q(source_kind=""),
                name="message_tool_sources_kind_not_empty",
                violation_error_message="source_kind must not be empty.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_kind} source {self.label}"


class CaseCitationKind(models.TextChoices):
    FULL = "full"  # 570 U.S. 297
    SHORT = "short"  # 570 U.S., at 311
    ID = "id"  # Id., at 312
    SUPRA = "supra"  # Grutter, supra, at 330
    REFERENCE = "reference"  # Grutter at 330 (a case named again with a pin cite)
    STATUTE = "statute"  # 42 U.S.C. § 1983
    OTHER = "other"  # law reviews, unknown citation forms


class CaseCitationStatus(models.TextChoices):
    VERIFIED = "verified"
    NAME_MISMATCH = "name_mismatch"
    # The case exists and is named right, but the pin cite is a page outside the opinion.
    PIN_MISMATCH = "pin_mismatch"
    NOT_FOUND = "not_found"
    AMBIGUOUS = "ambiguous"
    UNCHECKED = "unchecked"


# The case-citation statuses that name the case the citation is.
CASE_RESOLVED = (CaseCitationStatus.VERIFIED, CaseCitationStatus.NAME_MISMATCH, CaseCitationStatus.PIN_MISMATCH)


class CaseCitation(AppendOnlyModel):
    """A case citation written in an assistant's answer, as checked at finalize (``chats.case_citations``):
    one row per citation span of the answer, with what the check found."""

    Kind = CaseCitationKind
    Status = CaseCitationStatus

    class PinStatus(models.TextChoices):
        """How the pin cite (``at 311``) fared against the cited opinion's page range; empty when the citation
        has no pin cite."""

        NONE = "", "no pin cite"
        WITHIN = "within", "within the opinion's pages"
        OUTSIDE = "outside", "outside the opinion's pages"
        UNCHECKED = "unchecked", "not checked (the opinion's last page is unknown)"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="case_citations")
    answer_offset_start = models.IntegerField()
    answer_offset_end = models.IntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    citation = models.CharField(max_length=200)  # normalized: "570 U.S. 297"
    case_name = models.CharField(max_length=500, blank=True)  # as written in the answer
    status = models.CharField(max_length=16, choices=Status.choices)
    detail = models.CharField(max_length=1000, blank=True)
    # The case the citation really is (also for a name mismatch). An opinion a turn cites cannot be
    # deleted on its own, or the check could not be shown again.
    opinion = models.ForeignKey(
        CaselawOpinion, on_delete=models.RESTRICT, null=True, blank=True, related_name="case_citations"
    )
    provider = models.CharField(max_length=50, blank=True)  # where the citation was looked up
    # The pin cite as written (`311`, `311-12`), and how it fared (also the database defaults, for raw SQL
    # writers and rows from before it was checked).
    pin = models.CharField(max_length=40, blank=True, default="", db_default="")
    pin_status = models.CharField(max_length=16, blank=True, choices=PinStatus.choices, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = AppendOnlyQuerySet.as_manager()  # append-only: see chats.record

    class Meta:
        db_table = "message_case_citations"
        ordering = ["created_at", "answer_offset_start"]
        constraints = [
            # Only the statuses the checker gives: the verdict and the ledger read them.
            models.CheckConstraint(
                condition=Q(status__in=CaseCitationStatus.values),
                name="message_case_citations_status_valid",
                violation_error_message=f"status must be one of {', '.join(CaseCitationStatus.values)}.",
            ),
            # Only the pin outcomes the checker gives; a pin_mismatch is a pin outside the opinion.
            models.CheckConstraint(
                condition=Q(pin_status__in=["", "within", "outside", "unchecked"])
                & (~Q(status="pin_mismatch") | Q(pin_status="outside")),
                name="message_case_citations_pin_status_valid",
                violation_error_message="pin_status must be one of within, outside, unchecked (or empty); "
                "a pin_mismatch has its pin outside.",
            ),
            # Only the kinds the checker gives.
            models.CheckConstraint(
                condition=Q(kind__in=CaseCitationKind.values),
                name="message_case_citations_kind_valid",
                violation_error_message=f"kind must be one of {', '.join(CaseCitationKind.values)}.",
            ),
            # Offsets index the answer: negative ones point nowhere.
            models.CheckConstraint(
                condition=Q(answer_offset_start__gte=0),
                name="message_case_citations_offset_start_non_negative",
                violation_error_message="answer_offset_start must be >= 0.",
            ),
            # A citation is a non-empty span of the answer, or it cannot be shown.
            models.CheckConstraint(
                condition=Q(answer_offset_end__gt=models.F("answer_offset_start")),
                name="message_case_citations_offsets_ordered",
                violation_error_message="answer_offset_end must be > answer_offset_start.",
            ),
            # Verified, name_mismatch and pin_mismatch are statements about a case: they name it; the others
            # have none.
            models.CheckConstraint(
                condition=(Q(status__in=CASE_RESOLVED) & Q(opinion__isnull=False))
                | (~Q(status__in=CASE_RESOLVED) & Q(opinion__isnull=True)),
                name="message_case_citations_opinion_iff_resolved",
                violation_error_message="verified, name_mismatch and pin_mismatch need the opinion; other statuses "
                "have none.",
            ),
            # One row per citation span: a resumed turn adds only the spans it did not have.
            models.UniqueConstraint(
                fields=["message", "answer_offset_start"],
                name="message_case_citations_message_start_uniq",
                violation_error_message="This message already has a case citation at this offset.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.citation} ({self.status})"


class StatuteRowKind(models.TextChoices):
    CITATION = "citation"  # 9 U.S.C. § 2, resolved to its section
    QUOTE = "quote"  # a quotation attributed to a statute citation, checked against the section's text


class StatuteCitationStatus(models.TextChoices):
    """What the authority library said (``authorities.selectors``): a citation is verified, not found or
    unchecked; a quote is verified, altered, found elsewhere, failed or unchecked."""

    VERIFIED = "verified"
    NOT_FOUND = "not_found"
    UNCHECKED = "unchecked"
    ALTERED = "altered"
    FOUND_ELSEWHERE = "found_elsewhere"
    FAILED = "failed"


STATUTE_CITATION_STATUSES = ("verified", "not_found", "unchecked")
STATUTE_QUOTE_STATUSES = ("verified", "altered", "found_elsewhere", "failed", "unchecked")
# The quote statuses that found the quote in a section's text: the row holds the span, its digest and the section.
STATUTE_QUOTE_FOUND = ("verified", "altered", "found_elsewhere")


class StatuteCitation(AppendOnlyModel):
    """A statute or regulation citation written in an answer, or a quotation attributed to one, as the authority
    library checked it at finalize (``authorities.selectors.check_statutes``).

    One table for both kinds (``kind``): a quote is always a quote of a citation, and both carry the same facts
    (the citation as written and its answer span, the section, the release checked, a status and its reason), so
    one row shape, one ledger column and one seal row format serve both; the quote's own columns are empty for a
    citation, as the CHECK constraints hold. ``identifier`` and ``section`` name the section the row's text is
    from (for a quote, where the offsets point: the cited section, or the one a ``found_elsewhere`` quote was
    found in); the release is copied onto the row (code, title, release point, its label, official or not) so
    that the record names it whatever becomes of the library. The section is referenced by a foreign key
    (RESTRICT): a cited section cannot be deleted from under the record. Rows of turns finalized before this
    table existed stay ``message_case_citations`` rows of kind ``statute``, ``unchecked``."""

    Kind = StatuteRowKind
    Status = StatuteCitationStatus

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="statute_citations")
    kind = models.CharField(max_length=16, choices=StatuteRowKind.choices)
    # The row's place among its turn's statute rows (citations in answer order, then quotes in answer order; a
    # resumed turn's go on from its first run's).
    position = models.PositiveIntegerField(default=0)
    # The citation as written in the answer, and where (``answer[start:end]``); for a quote, its citation's.
    citation = models.CharField(max_length=200)
    answer_offset_start = models.PositiveIntegerField()
    answer_offset_end = models.PositiveIntegerField()
    # The citation as a lawyer writes it, with the release checked: `9 U.S.C. § 2 (Online@117-80)`.
    cited = models.CharField(max_length=255, blank=True)
    # The section (`/us/usc/t9/s2`; a CFR part `/us/cfr/t27/p478`) and the subdivision pinned (`a/1`).
    identifier = models.CharField(max_length=255, blank=True)
    pin = models.CharField(max_length=64, blank=True)
    section = models.ForeignKey(
        "authorities.StatuteSection",
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="statute_citations",
    )
    # The release checked against: `usc` 9 `Online@117-80`; `cfr` 27 `2017-04-01` ("revised as of April 1, 2017").
    code = models.CharField(max_length=8, blank=True)
    title = models.PositiveIntegerField(null=True, blank=True)
    release_point = models.CharField(max_length=64, blank=True)
    release_label = models.CharField(max_length=128, blank=True)
    release_official = models.BooleanField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=StatuteCitationStatus.choices)
    reason = models.CharField(max_length=1000)
    # A quote's own facts (empty for a citation): the quote, how the verifier matched it, where it is in the
    # section's text (``section.text[start:end]``), the SHA-256 of that passage, the alterations and context
    # flags (offsets into the same text), and where else it was found (`9 U.S.C. § 3`).
    quote = models.TextField(blank=True)
    verification_method = models.CharField(max_length=32, blank=True)
    verification_confidence = models.FloatField(null=True, blank=True)
    # Integer columns like the quote tables' (the ledger's trace reads them together); never negative (CHECK).
    source_offset_start = models.IntegerField(null=True, blank=True)
    source_offset_end = models.IntegerField(null=True, blank=True)
    passage_sha256 = models.CharField(max_length=64, blank=True)
    alterations = models.JSONField(blank=True, default=list)
    context_flags = models.JSONField(blank=True, default=list)
    found_in = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = AppendOnlyQuerySet.as_manager()  # append-only: see chats.record

    class Meta:
        db_table = "message_statute_citations"
        ordering = ["created_at", "position", "id"]
        constraints = [
            # Only the kinds and statuses the library gives: the verdict and the ledger read them.
            models.CheckConstraint(
                condition=(Q(kind=StatuteRowKind.CITATION) & Q(status__in=STATUTE_CITATION_STATUSES))
                | (Q(kind=StatuteRowKind.QUOTE) & Q(status__in=STATUTE_QUOTE_STATUSES)),
                name="message_statute_citations_kind_status_valid",
                violation_error_message="A citation is verified, not_found or unchecked; a quote is verified, "
                "altered, found_elsewhere, failed or unchecked.",
            ),
            # A row is a non-empty span of the answer, or it cannot be shown; and says why it has its status.
            models.CheckConstraint(
                condition=Q(answer_offset_end__gt=F("answer_offset_start")) & ~Q(citation="") & ~Q(reason=""),
                name="message_statute_citations_written_and_reasoned",
                violation_error_message="A statute row needs its citation, a non-empty answer span and a reason.",
            ),
            # A verified citation names its section and the release it is in; a check names the release it used.
            models.CheckConstraint(
                condition=~Q(kind=StatuteRowKind.CITATION, status="verified")
                | (~Q(identifier="") & ~Q(release_point="") & Q(title__isnull=False) & ~Q(code="")),
                name="message_statute_citations_verified_named",
                violation_error_message="A verified citation names its section and release.",
            ),
            # A citation row has none of a quote's facts.
            models.CheckConstraint(
                condition=~Q(kind=StatuteRowKind.CITATION)
                | (
                    Q(quote="", verification_method="", passage_sha256="", found_in="")
                    & Q(source_offset_start__isnull=True, source_offset_end__isnull=True)
                    & Q(verification_confidence__isnull=True, alterations=[], context_flags=[])
                ),
                name="message_statute_citations_citation_shape",
                violation_error_message="A citation row has no quote, offsets, digest, alterations or found_in.",
            ),
            # A quote found in a section's text holds the section, its span (forward), the passage's digest and
            # the match; one not found (failed, unchecked) has none of them.
            models.CheckConstraint(
                condition=~Q(kind=StatuteRowKind.QUOTE)
                | (
                    Q(status__in=STATUTE_QUOTE_FOUND)
                    & ~Q(quote="")
                    & Q(section__isnull=False, source_offset_start__isnull=False, source_offset_end__isnull=False)
                    & Q(source_offset_start__gte=0, source_offset_end__gte=F("source_offset_start"))
                    & Q(passage_sha256__regex=r"^[0-9a-f]{64}$")
                    & Q(verification_method__in=VERIFIED_METHODS, verification_confidence__isnull=False)
                    & ~Q(identifier="")
                    & ~Q(release_point="")
                )
                | (
                    ~Q(status__in=STATUTE_QUOTE_FOUND)
                    & ~Q(quote="")
                    & Q(source_offset_start__isnull=True, source_offset_end__isnull=True, passage_sha256="")
                    & Q(verification_method="", verification_confidence__isnull=True)
                    & Q(alterations=[], context_flags=[], found_in="")
                ),
                name="message_statute_citations_quote_shape",
                violation_error_message="A quote found holds its section, span, digest and match; one not found "
                "holds none of them.",
            ),
            # Only a quote found in another section says where; it always does.
            models.CheckConstraint(
                condition=Q(status="found_elsewhere", found_in__gt="")
                | (~Q(status="found_elsewhere") & Q(found_in="")),
                name="message_statute_citations_found_in_iff_elsewhere",
                violation_error_message="found_in is set exactly for a quote found elsewhere.",
            ),
            # An altered quote is the verifier's altered match, and nothing else is.
            models.CheckConstraint(
                condition=~Q(kind=StatuteRowKind.QUOTE)
                | ~Q(status__in=STATUTE_QUOTE_FOUND)
                | Q(status="found_elsewhere")
                | (Q(status="altered") & Q(verification_method=VerificationMethod.ALTERED))
                | (Q(status="verified") & ~Q(verification_method=VerificationMethod.ALTERED)),
                name="message_statute_citations_altered_is_altered",
                violation_error_message="A quote is altered exactly when the verifier's match is altered.",
            ),
            # The trace and the seal iterate the alterations and context flags: anything but a list cannot be shown.
            models.CheckConstraint(
                condition=Exact(JSONTypeOf("alterations"), Value("array"))
                & Exact(JSONTypeOf("context_flags"), Value("array")),
                name="message_statute_citations_lists",
                violation_error_message="alterations and context_flags must be JSON arrays.",
            ),
            # Confidence is a probability-like score; outside 0..1 it means nothing.
            models.CheckConstraint(
                condition=Q(verification_confidence__isnull=True)
                | (Q(verification_confidence__gte=0) & Q(verification_confidence__lte=1)),
                name="message_statute_citations_confidence_range",
                violation_error_message="verification_confidence must be within 0..1.",
            ),
        ]

    def __str__(self) -> str:
        return f"statute {self.kind} {self.cited or self.citation} ({self.status})"


class TurnRateCount(models.Model):
    """How many turns a user started in one window of the turn rate (``LQAI_THROTTLE_TURNS``): counted by
    one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` per turn (chats.throttles), so that concurrent
    requests of every server process count one after the other. Rows of past windows are disposable."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    # The window's start, in whole seconds since the epoch (a multiple of the rate's period).
    window_start = models.BigIntegerField()
    turns = models.PositiveIntegerField(default=1)

    class Meta:
        db_table = "turn_rate_counts"
        constraints = [
            # The conflict target of the count (chats.throttles), and the index its prune of old windows uses.
            models.UniqueConstraint(
                fields=["user", "window_start"],
                name="turn_rate_counts_user_window_uniq",
                violation_error_message="This user already has a count for this window.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.turns} turn(s) of user {self.user_id} from {self.window_start}"


class Invitation(models.Model):
    """A one-time link by which a matter's owner brings in a colleague, with or without an account yet
    (``chats.invitations``). Only the SHA-256 of the link's token is stored: the link itself is shown once, to
    the owner who made it. It works until ``expires_at``, once (``used_at``, ``used_by``), unless revoked."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "project_invitations"
        ordering = ["-created_at"]
        constraints = [
            # A link that expires before it is made could never be used: a mistake, not an invitation.
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")),
                name="project_invitations_expires_after_creation",
                violation_error_message="An invitation expires after it is made.",
            ),
            # Used means used by someone: the matter's record says who joined by which link.
            models.CheckConstraint(
                condition=Q(used_at__isnull=True, used_by__isnull=True)
                | Q(used_at__isnull=False, used_by__isnull=False),
                name="project_invitations_used_by_whom",
                violation_error_message="A used invitation names who used it.",
            ),
            # A link ends once: used or revoked, never both.
            models.CheckConstraint(
                condition=Q(used_at__isnull=True) | Q(revoked_at__isnull=True),
                name="project_invitations_used_or_revoked",
                violation_error_message="An invitation is used or revoked, not both.",
            ),
        ]

    def __str__(self) -> str:
        return f"invitation {self.id} to {self.project_id}"
