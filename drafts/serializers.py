"""The drafts API's input and output: the upload, and the JSON of docs/drafts.md with its turn and changes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from drafts.checking import STATUSES
from drafts.reading import KINDS

FINDING_KINDS = ("case_citation", "statute_citation", "quote")
AUTHORITY_KINDS = ("case", "statute", "regulation", "other")


class DraftUploadSerializer(serializers.Serializer[dict[str, Any]]):
    file = serializers.FileField(
        help_text=f"The draft: {', '.join(sorted(KINDS))} (its name's extension says which); at most "
        "LQAI_MAX_UPLOAD_BYTES.",
        allow_empty_file=False,
    )
    chat = serializers.UUIDField(
        required=False,
        help_text="A chat of the matter to record the check in; by default the chat of the last check of a draft "
        "of the same file name in the matter, else a new one.",
    )


class AlterationSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.CharField()
    quote_text = serializers.CharField(required=False)
    source_start = serializers.IntegerField(required=False)
    source_end = serializers.IntegerField(required=False)


class FindingSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=list(FINDING_KINDS))
    text = serializers.CharField(help_text="As the draft has it (a quotation without its marks).")
    start = serializers.IntegerField(help_text="Offset in the draft's text.")
    end = serializers.IntegerField()
    page = serializers.CharField(allow_null=True, help_text="The draft's page; null without pages.")
    authority = serializers.IntegerField(allow_null=True, help_text="Index of its entry in `authorities`.")
    form = serializers.CharField()
    pin = serializers.CharField(allow_blank=True)
    parentheticals = serializers.ListField(child=serializers.CharField())
    cited_by = serializers.IntegerField(allow_null=True, help_text="A quotation's citation, an index in `findings`.")
    footnote = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=list(STATUSES))
    words = serializers.CharField()
    needs_review = serializers.BooleanField()
    detail = serializers.CharField(allow_blank=True)
    alterations = serializers.ListField(child=serializers.DictField(), required=False)


class AuthoritySerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=list(AUTHORITY_KINDS))
    cite = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    pages = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=list(STATUSES))


class ChangedFindingSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.CharField()
    text = serializers.CharField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    page = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    needs_review = serializers.BooleanField()
    detail = serializers.CharField(allow_blank=True)
    authority_cite = serializers.CharField(allow_blank=True)


class DraftChangesSerializer(serializers.Serializer[dict[str, Any]]):
    previous = serializers.UUIDField(help_text="The previous check of the draft.")
    previous_turn = serializers.UUIDField()
    fixed = ChangedFindingSerializer(many=True, help_text="Needed review before; no longer (or gone).")
    new = ChangedFindingSerializer(many=True, help_text="Needs review now and did not before.")
    still_open = ChangedFindingSerializer(many=True, help_text="Needed review before and still does.")


class DraftSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.UUIDField(help_text="The check's id (GET /api/drafts/{id}/).")
    matter = serializers.UUIDField()
    verdict = serializers.ChoiceField(
        choices=["pass", "review", "fail", "none"],
        help_text="The draft's verdict: its turn's, by the one rule over its rows (every quotation is one; those "
        "nothing could check are 'unchecked' rows, which need review).",
    )
    turn_verdict = serializers.CharField(help_text="The turn's verdict (the same as verdict; kept for clients).")
    findings = FindingSerializer(many=True)
    authorities = AuthoritySerializer(many=True)
    turn = serializers.UUIDField(help_text="The turn's message (its answer is the draft's text).")
    chat = serializers.UUIDField(help_text="The draft's chat: every check of the draft is a turn of it.")
    page = serializers.CharField(help_text="The check's page for lawyers (/drafts/{id}/).")
    file_name = serializers.CharField()
    format = serializers.ChoiceField(choices=["docx", "pdf", "text", "markdown"])
    file_sha256 = serializers.CharField()
    pages = serializers.ListField(child=serializers.ListField(), help_text="[start, label] pairs; empty without pages.")
    created_at = serializers.DateTimeField()
    changes = DraftChangesSerializer(allow_null=True, help_text="What changed since the previous check; null first.")
