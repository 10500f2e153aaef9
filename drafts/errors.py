"""The one error a draft that cannot be read raises, with a sentence a lawyer can act on."""


class UnreadableDraft(ValueError):
    """The file is not a draft that can be read (not the type its name claims, no text layer, encrypted,
    oversized, or built to exhaust the reader); ``str(error)`` says why and what to do, for the person who
    uploaded it. Nothing is written for such a file."""
