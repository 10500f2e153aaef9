"""factory-boy factories, one per model, used by the whole suite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import factory
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from knox.models import AuthToken

from chats import models
from chats.documents import save_document
from chats.services import passage_sha256
from citations import ledger
from citations.models import PROVENANCE, CitationLedgerEntry, SourceKind
from lqai_verify.verification import QuoteMatch, alterations_record, verify_quote

TEXT = (
    "The Equal Protection Clause requires that a racial classification survive strict scrutiny. "
    "The reviewing court must ultimately be satisfied that no workable race-neutral alternative would "
    "produce the educational benefits of diversity."
)


# A quote of TEXT with a bracketed letter and an omission ("ultimately"): a tolerant match with two alterations.
ALTERED_QUOTE = "[t]he reviewing court must . . . be satisfied"


def _verified(quote: str, source: str) -> QuoteMatch:
    match = verify_quote(quote, source)
    assert match is not None, quote
    return match


def _altered(source_text: Callable[[Any], str]) -> dict[str, Any]:
    """The fields of a quote row verified as a tolerant match of ``ALTERED_QUOTE`` (the ``altered`` trait);
    ``source_text`` reads the row's source text."""

    def match(row: Any) -> QuoteMatch:
        return _verified(row.quote, source_text(row))

    return {
        "quote": ALTERED_QUOTE,
        "source_offset_start": factory.LazyAttribute(lambda c: match(c).start),
        "source_offset_end": factory.LazyAttribute(lambda c: match(c).end),
        "verification_method": "tolerant_match",
        "verification_confidence": factory.LazyAttribute(lambda c: match(c).confidence),
        "alterations": factory.LazyAttribute(lambda c: alterations_record(match(c))),
    }


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


def api_token(user: User) -> str:
    """A new API token of ``user`` (django-rest-knox: only its digest is stored), for ``Authorization: Bearer``."""
    _, token = AuthToken.objects.create(user=user)
    return str(token)


class ProjectFactory(factory.django.DjangoModelFactory[models.Project]):
    class Meta:
        model = models.Project
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Matter {n}")
    owner = factory.SubFactory(UserFactory)

    @factory.post_generation
    def members(self, create: bool, extracted: list | None, **kwargs: object) -> None:
        if create and extracted:
            self.members.add(*extracted)


class ChatFactory(factory.django.DjangoModelFactory[models.Chat]):
    class Meta:
        model = models.Chat

    project = factory.SubFactory(ProjectFactory)
    owner = factory.LazyAttribute(lambda c: c.project.owner if c.project else UserFactory())
    title = factory.Faker("sentence", nb_words=4)


class MessageFactory(factory.django.DjangoModelFactory[models.Message]):
    class Meta:
        model = models.Message

    chat = factory.SubFactory(ChatFactory)
    role = models.Message.Role.ASSISTANT
    content = factory.Faker("paragraph")
    status = models.Message.Status.COMPLETE
    finalized_at = factory.LazyFunction(timezone.now)


class UserMessageFactory(MessageFactory):
    role = models.Message.Role.USER
    finalized_at = factory.LazyFunction(lambda: None)


class DocumentFactory(factory.django.DjangoModelFactory[models.Document]):
    class Meta:
        model = models.Document

    project = factory.SubFactory(ProjectFactory)
    title = factory.Sequence(lambda n: f"Memo {n}")
    content = TEXT

    @classmethod
    def _create(cls, model_class: type[models.Document], *args: Any, **kwargs: Any) -> models.Document:
        # Through the service every creation path takes: the document and its passages.
        return save_document(document=model_class(**kwargs))


class CaselawOpinionFactory(factory.django.DjangoModelFactory[models.CaselawOpinion]):
    class Meta:
        model = models.CaselawOpinion

    provider = "local"
    cluster_id = factory.Sequence(lambda n: f"c{n}")
    opinion_id = factory.Sequence(lambda n: f"o{n}")
    case_name = factory.Sequence(lambda n: f"Doe v. Roe {n}")
    citation = "570 U.S. 297"
    court = "Supreme Court of the United States"
    absolute_url = factory.LazyAttribute(lambda o: f"https://example.com/opinion/{o.opinion_id}/")
    text = TEXT


FAILED_CLAIM: dict[str, Any] = {
    "verification_method": "unverified",
    "source_offset_start": None,
    "source_offset_end": None,
    "verification_confidence": None,
    "passage_sha256": "",
}


def _next_quote_position(row: Any) -> int:
    """The next place among its turn's quotes (KB and caselaw numbered together), as finalize numbers them."""
    message = row.message
    if message._state.adding:
        return 0
    return int(message.citations.count() + message.caselaw_citations.count())


def _next_tool_source_position(row: Any) -> int:
    message = row.message
    return 0 if message._state.adding else int(message.tool_sources.count())


class DocumentQuoteFactory(factory.django.DjangoModelFactory[models.DocumentQuote]):
    class Meta:
        model = models.DocumentQuote

    message = factory.SubFactory(MessageFactory)
    document = factory.SubFactory(
        DocumentFactory, project=factory.LazyAttribute(lambda d: d.factory_parent.message.chat.project)
    )
    quote = "must ultimately be satisfied"
    source_offset_start = factory.LazyAttribute(lambda c: c.document.content.find(c.quote))
    source_offset_end = factory.LazyAttribute(lambda c: c.source_offset_start + len(c.quote))
    verification_method = "exact_match"
    verification_confidence = 1.0
    position = factory.LazyAttribute(_next_quote_position)
    passage_sha256 = factory.LazyAttribute(
        lambda c: passage_sha256(c.document.content[c.source_offset_start : c.source_offset_end])
    )

    class Params:
        # A claim that did not verify: no span, no score, no digest, and why.
        failed = factory.Trait(**FAILED_CLAIM, unverified_reason="not found in the document")
        altered = factory.Trait(**_altered(lambda c: c.document.content))


class OpinionQuoteFactory(factory.django.DjangoModelFactory[models.OpinionQuote]):
    class Meta:
        model = models.OpinionQuote

    message = factory.SubFactory(MessageFactory)
    opinion = factory.SubFactory(CaselawOpinionFactory)
    quote = "strict scrutiny"
    source_offset_start = factory.LazyAttribute(lambda c: c.opinion.text.find(c.quote))
    source_offset_end = factory.LazyAttribute(lambda c: c.source_offset_start + len(c.quote))
    verification_method = "exact_match"
    verification_confidence = 1.0
    position = factory.LazyAttribute(_next_quote_position)
    passage_sha256 = factory.LazyAttribute(
        lambda c: passage_sha256(c.opinion.text[c.source_offset_start : c.source_offset_end])
    )

    class Params:
        failed = factory.Trait(**FAILED_CLAIM, unverified_reason="not found in the opinion")
        altered = factory.Trait(**_altered(lambda c: c.opinion.text))


class MessageToolSourceFactory(factory.django.DjangoModelFactory[models.MessageToolSource]):
    class Meta:
        model = models.MessageToolSource

    message = factory.SubFactory(MessageFactory)
    source_kind = models.MessageToolSource.SourceKind.CASELAW
    tool = "caselaw_search"
    provider = "courtlistener"
    label = factory.Sequence(lambda n: f"Doe v. Roe {n}")
    subtitle = "570 U.S. 297 (2013)"
    url = "https://www.courtlistener.com/opinion/1/doe-v-roe/"
    external_ref = factory.Sequence(lambda n: str(1000 + n))
    position = factory.LazyAttribute(_next_tool_source_position)


class CaseCitationFactory(factory.django.DjangoModelFactory[models.CaseCitation]):
    """A verified full citation of the opinion, as the answer's first words."""

    class Meta:
        model = models.CaseCitation

    message = factory.SubFactory(MessageFactory)
    opinion = factory.SubFactory(CaselawOpinionFactory)
    answer_offset_start = factory.Sequence(lambda n: 40 * n)
    answer_offset_end = factory.LazyAttribute(lambda c: c.answer_offset_start + len(c.citation))
    kind = models.CaseCitation.Kind.FULL
    citation = "570 U.S. 297"
    case_name = factory.LazyAttribute(lambda c: c.opinion.case_name if c.opinion else "Doe v. Roe")
    status = models.CaseCitation.Status.VERIFIED
    detail = factory.LazyAttribute(lambda c: f"{c.citation} is {c.opinion.case_name}" if c.opinion else "")
    provider = "local"


class CitationLedgerEntryFactory(factory.django.DjangoModelFactory[CitationLedgerEntry]):
    """A ledger entry mirroring its source row, as ``citations.ledger.assemble`` would write it.

    Defaults to an entry for a KB quote; the ``caselaw``, ``tool_source`` and ``case_citation`` traits give the
    other sources.
    Pass an existing source row (``message_citation=...``) to index that row.
    """

    class Meta:
        model = CitationLedgerEntry

    class Params:
        caselaw = factory.Trait(
            message_citation=None,
            message_caselaw_citation=factory.SubFactory(OpinionQuoteFactory),
            source_kind=SourceKind.CASELAW,
            verification_status=factory.LazyAttribute(lambda e: e.message_caselaw_citation.verification_method),
            confidence=factory.LazyAttribute(lambda e: e.message_caselaw_citation.verification_confidence),
            provider=factory.LazyAttribute(lambda e: e.message_caselaw_citation.opinion.provider),
            retrieved_at=factory.LazyAttribute(lambda e: e.message_caselaw_citation.created_at),
        )
        tool_source = factory.Trait(
            message_citation=None,
            message_tool_source=factory.SubFactory(MessageToolSourceFactory),
            source_kind=factory.LazyAttribute(lambda e: e.message_tool_source.source_kind),
            verification_status=PROVENANCE,
            confidence=None,
            provider=factory.LazyAttribute(lambda e: e.message_tool_source.provider),
            retrieved_at=factory.LazyAttribute(lambda e: e.message_tool_source.created_at),
        )
        case_citation = factory.Trait(
            message_citation=None,
            message_case_citation=factory.SubFactory(CaseCitationFactory),
            source_kind=SourceKind.CASELAW,
            verification_status=factory.LazyAttribute(lambda e: e.message_case_citation.status),
            confidence=None,
            provider=factory.LazyAttribute(lambda e: e.message_case_citation.provider or None),
            retrieved_at=factory.LazyAttribute(lambda e: e.message_case_citation.created_at),
        )

    message_citation = factory.SubFactory(DocumentQuoteFactory)
    message_caselaw_citation = None
    message_tool_source = None
    message_case_citation = None
    message = factory.LazyAttribute(
        lambda e: (
            (
                e.message_citation or e.message_caselaw_citation or e.message_tool_source or e.message_case_citation
            ).message
        )
    )
    chat = factory.LazyAttribute(lambda e: e.message.chat)
    project = factory.LazyAttribute(lambda e: e.chat.project)
    source_kind = SourceKind.KB_DOCUMENT
    verification_status = factory.LazyAttribute(lambda e: e.message_citation.verification_method)
    confidence = factory.LazyAttribute(lambda e: float(e.message_citation.verification_confidence))
    provider = None
    retrieved_at = None


# --- A turn with its ledger written by the real writer ---------------------------------------------------------------


def assembled_turn(
    chat: models.Chat | None = None, *, kb: int = 1, caselaw: int = 1, tools: int = 1, altered: bool = False
) -> models.Message:
    """An assistant turn (of ``chat``, or of a new chat in a new matter) that quoted ``kb`` KB documents
    and ``caselaw`` opinions (with alterations and an omission if ``altered``) and consulted ``tools``
    sources, with its ledger entries written by the real writer, ``citations.ledger.assemble``."""
    with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
        message = MessageFactory.create() if chat is None else MessageFactory.create(chat=chat)
        DocumentQuoteFactory.create_batch(kb, message=message, altered=altered)
        OpinionQuoteFactory.create_batch(caselaw, message=message, altered=altered)
        MessageToolSourceFactory.create_batch(tools, message=message)
        ledger.assemble(message)
    return message
