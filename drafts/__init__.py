"""Drafts: a brief read into text with its own pages, and everything in it found (citations, quotations)."""
