"""Case citations in an answer, checked: the cited case exists, and the name written belongs to it.

The service is :func:`check_case_citations`, given the answer's text or, for a streamed answer, what
:class:`StreamedCitations` read of it while it streamed; see :mod:`chats.case_citations.checker` for its contract.
"""

from chats.case_citations.checker import CheckedCitation, Status, check_case_citations, check_found_citations
from chats.case_citations.extraction import Kind, StreamedCitations

__all__ = ["CheckedCitation", "Kind", "Status", "StreamedCitations", "check_case_citations", "check_found_citations"]
