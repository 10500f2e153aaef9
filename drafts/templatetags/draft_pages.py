"""The drafts block of a matter's page (``pages/templates/pages/matter.html``): the matter's drafts and the upload
form, drawn by the drafts app so that the workspace pages import nothing of it (the template names the tag)."""

from __future__ import annotations

from typing import Any

from django import template

from chats.models import Project
from drafts.pages import DraftUploadForm, matter_drafts

register = template.Library()


@register.inclusion_tag("drafts/_matter_drafts.html", takes_context=True)
def drafts_of_matter(context: template.Context, project: Project) -> dict[str, Any]:
    """The drafts of ``project`` (which the page's view has already found visible to its user) and the form."""
    return {
        "project": project,
        "drafts": matter_drafts(project),
        "form": DraftUploadForm(),
        "csrf_token": context.get("csrf_token"),
    }
