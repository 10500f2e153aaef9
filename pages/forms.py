"""The workspace's forms: they parse what a lawyer types or uploads; the services in ``chats`` do the rest.

Bounds are the models' and the API's (a matter's name, a chat's title, a document's title), so that a form
refuses what the API would refuse, with the reason in words next to the field.
"""

from __future__ import annotations

from typing import Any

from django import forms

from chats.models import Chat, Document, Project


def _max_length(model: type[Project] | type[Chat] | type[Document], field: str) -> int:
    length: int = model._meta.get_field(field).max_length  # type: ignore[union-attr,assignment]  # set on these
    return length


class _OneOfSeveral(forms.Form):
    """A form drawn on a page beside others with fields of the same names: its fields' ids start with
    ``id_prefix``, so that each label names its own field; the names posted stay the fields' own."""

    id_prefix = "id"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", f"{self.id_prefix}_%s")
        super().__init__(*args, **kwargs)


class MatterForm(forms.Form):
    name = forms.CharField(label="Name", max_length=_max_length(Project, "name"))


class ChatForm(_OneOfSeveral):
    id_prefix = "chat"

    title = forms.CharField(label="Title (optional)", max_length=_max_length(Chat, "title"), required=False)


class DocumentUploadForm(_OneOfSeveral):
    id_prefix = "document"

    title = forms.CharField(label="Title", max_length=_max_length(Document, "title"))
    file = forms.FileField(label="File (a PDF with a text layer, or UTF-8 text)", allow_empty_file=True)


class MemberForm(_OneOfSeveral):
    id_prefix = "member"

    username = forms.CharField(label="Username", max_length=150)


class SignUpForm(forms.Form):
    username = forms.CharField(label="Username", max_length=150)
    password = forms.CharField(label="Password", widget=forms.PasswordInput(render_value=False), strip=False)
    password_again = forms.CharField(
        label="Password again", widget=forms.PasswordInput(render_value=False), strip=False
    )

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("password") and data.get("password_again") and data["password"] != data["password_again"]:
            self.add_error("password_again", "The two passwords differ.")
        return data
