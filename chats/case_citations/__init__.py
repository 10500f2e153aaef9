"""Case citations in an answer, checked: the cited case exists, and the name written belongs to it.

The service is :func:`check_case_citations`; see :mod:`chats.case_citations.checker` for its contract.
"""

from chats.case_citations.checker import CheckedCitation, Status, check_case_citations
from chats.case_citations.extraction import Kind

__all__ = ["CheckedCitation", "Kind", "Status", "check_case_citations"]
