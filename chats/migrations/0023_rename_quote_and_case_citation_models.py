"""The three per-turn claim models get names a reader can tell apart: ``MessageCitation`` becomes
``DocumentQuote`` (a quote from a KB document), ``MessageCaselawCitation`` becomes ``OpinionQuote`` (a quote
from a caselaw opinion) and ``MessageCaseCitation`` becomes ``CaseCitation`` (a case cited in the answer).

Their tables keep their names (``db_table``), so the database does not change; Django renames their content
types itself, and the permissions' codenames and names (``view_messagecitation`` -> ``view_documentquote``) are renamed
here, so that a staff user's grants keep their meaning."""

from django.db import migrations

RENAMES = (
    ("MessageCitation", "DocumentQuote"),
    ("MessageCaselawCitation", "OpinionQuote"),
    ("MessageCaseCitation", "CaseCitation"),
)
VERBOSE_NAMES = {
    "MessageCitation": "message citation",
    "MessageCaselawCitation": "message caselaw citation",
    "MessageCaseCitation": "message case citation",
    "DocumentQuote": "document quote",
    "OpinionQuote": "opinion quote",
    "CaseCitation": "case citation",
}
ACTIONS = ("add", "change", "delete", "view")


def _rename_permissions(apps, schema_editor, *, backwards: bool) -> None:
    Permission = apps.get_model("auth", "Permission")
    db = schema_editor.connection.alias
    for old, new in RENAMES:
        old, new = (new, old) if backwards else (old, new)
        for action in ACTIONS:
            stale = Permission.objects.using(db).filter(content_type__app_label="chats", codename=f"{action}_{old.lower()}")
            # A permission under the new name exists only if post_migrate ran in between: keep that one.
            if Permission.objects.using(db).filter(content_type__app_label="chats", codename=f"{action}_{new.lower()}").exists():
                continue
            stale.update(codename=f"{action}_{new.lower()}", name=f"Can {action} {VERBOSE_NAMES[new]}")


def rename_permissions(apps, schema_editor):
    _rename_permissions(apps, schema_editor, backwards=False)


def unrename_permissions(apps, schema_editor):
    _rename_permissions(apps, schema_editor, backwards=True)


class Migration(migrations.Migration):

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("chats", "0022_document_and_opinion_pages"),
        ("citations", "0013_ledger_admin_indexes"),
    ]

    operations = [
        *(migrations.RenameModel(old_name=old, new_name=new) for old, new in RENAMES),
        migrations.RunPython(rename_permissions, unrename_permissions, elidable=False),
    ]
