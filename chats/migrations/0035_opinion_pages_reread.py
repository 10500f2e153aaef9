"""The pages of stored opinions read again, now that bracketed reporter markers, a parallel reporter's markers
and a slip opinion's own pages are told apart (``lqai_verify.verification.page_breaks``).

Only opinions no quote cites: what the record shows of a cited opinion, its pages included, is fixed
(``0031_cited_source_fixed``); a cited opinion's old page map gives no pin cite where it cannot be a reporter's
(``page_cites.pin_cite``), never a wrong one."""

from django.db import migrations


def reread_pages_of_uncited_opinions(apps, schema_editor):
    from lqai_verify.verification.page_breaks import opinion_pages

    CaselawOpinion = apps.get_model("chats", "CaselawOpinion")
    uncited = CaselawOpinion.objects.filter(citations__isnull=True).only("pk", "text", "citation", "pages")
    for opinion in uncited.iterator(chunk_size=200):
        pages = opinion_pages(opinion.text, citation=opinion.citation)
        if pages != opinion.pages:
            CaselawOpinion.objects.filter(pk=opinion.pk).update(pages=pages)


class Migration(migrations.Migration):
    dependencies = [("chats", "0034_verdict_review")]

    operations = [migrations.RunPython(reread_pages_of_uncited_opinions, migrations.RunPython.noop, elidable=True)]
