"""The authority library's tables: releases of a code's titles, the files they were loaded from, and sections.

A release is one title of one code at one release point (9 U.S.C. at ``Online@117-80``; 27 C.F.R. revised as
of April 1, 2017); a later release of the same title is another row, kept beside the earlier one. Rows are
written only by :mod:`authorities.loading`. Table names are explicit: the docs and the loader's reports name them.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class Code(models.TextChoices):
    USC = "usc", "U.S. Code"
    CFR = "cfr", "Code of Federal Regulations"


class AuthorityRelease(models.Model):
    """One title of one code at one release point."""

    code = models.CharField(max_length=8, choices=Code.choices)
    title = models.PositiveIntegerField()
    # The publisher's name of the release point: `Online@117-80` (OLRC), `2017-04-01` (GPO's annual CFR).
    release_point = models.CharField(max_length=64)
    # How a citation names it: `Online@117-80`, `revised as of April 1, 2017`.
    label = models.CharField(max_length=128)
    # The CFR's revision date; for the U.S. Code the date OLRC made the file.
    released_on = models.DateField()
    # Orders the releases of a title, latest last: the U.S. Code's congress and public law (`117-00080` of
    # `Online@117-80`), the CFR's revision date (`2017-04-01`).
    sequence = models.CharField(max_length=32)
    official = models.BooleanField()
    # What the text is as evidence, in words (positive law; official edition; ...).
    legal_status = models.CharField(max_length=255)
    publisher = models.CharField(max_length=128)
    loaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "authority_releases"
        ordering = ["code", "title", "-sequence", "-id"]
        constraints = [
            # A release point is loaded once; a later one is a new row beside it.
            models.UniqueConstraint(
                fields=["code", "title", "release_point"],
                name="authority_releases_one_per_release_point",
                violation_error_message="This release of this title is already loaded.",
            ),
            # Every check names the release it used: it needs a name.
            models.CheckConstraint(
                condition=~Q(release_point="") & ~Q(label="") & ~Q(sequence=""),
                name="authority_releases_named",
                violation_error_message="A release needs its release point and label.",
            ),
        ]
        # The resolver's lookup: the latest release of a title.
        indexes = [models.Index(fields=["code", "title", "-sequence"], name="authority_releases_latest")]
        # Who may load a file from the admin (authorities.admin): an operator's, not every staff user's.
        permissions = [("load_authorities", "Can load USLM and case-law files from the admin")]

    def __str__(self) -> str:
        return f"{self.get_code_display()} title {self.title} ({self.label})"


class AuthorityFile(models.Model):
    """One file loaded into a release, by its SHA-256; ``completed_at`` is set once every section is stored.

    A CFR title is published in volumes: ``first_part``/``last_part`` say which parts the file covers
    (``last_part`` null: to the end), so a citation of a part in a volume not loaded is unchecked, never
    reported as not found. A U.S. Code file covers its whole title (both null)."""

    release = models.ForeignKey(AuthorityRelease, on_delete=models.CASCADE, related_name="files")
    sha256 = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255)
    first_part = models.PositiveIntegerField(null=True, blank=True)
    last_part = models.PositiveIntegerField(null=True, blank=True)
    sections = models.PositiveIntegerField(default=0)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "authority_files"
        constraints = [
            # A file that covers parts says from which one.
            models.CheckConstraint(
                condition=Q(last_part__isnull=True)
                | Q(first_part__isnull=False, first_part__lte=models.F("last_part")),
                name="authority_files_part_range",
                violation_error_message="A file's last part cannot come before its first.",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class StatuteSection(models.Model):
    """One section of a release: its text without source credits and notes, with where each subdivision and
    printed page starts in it.

    ``subdivisions``: ``[{"path": "b/1", "start": int, "end": int}, ...]``; ``text[start:end]`` is the
    subdivision ``(b)(1)``, its label included. ``pages``: ``[{"page": "21", "offset": int}, ...]``, the
    printed page that starts at ``offset`` (the first at 0: the page the section starts on); empty where the
    edition has no pages (the U.S. Code online)."""

    release = models.ForeignKey(AuthorityRelease, on_delete=models.CASCADE, related_name="sections")
    identifier = models.CharField(max_length=255)
    number = models.CharField(max_length=64)
    heading = models.TextField(blank=True)
    text = models.TextField()
    subdivisions = models.JSONField(default=list)
    pages = models.JSONField(default=list)
    # The part of a CFR section (`478` of `478.11`); null in the U.S. Code.
    part = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        db_table = "authority_sections"
        ordering = ["id"]
        constraints = [
            # Loading a file twice adds nothing: a section is stored once per release.
            models.UniqueConstraint(
                fields=["release", "identifier"],
                name="authority_sections_one_per_release",
                violation_error_message="This section is already stored for this release.",
            ),
            models.CheckConstraint(
                condition=~Q(identifier="") & ~Q(number=""),
                name="authority_sections_identified",
                violation_error_message="A section needs its identifier and number.",
            ),
        ]
        # The resolver's part lookup (`27 C.F.R. pt. 478`); the section lookup uses the unique constraint's index.
        indexes = [models.Index(fields=["release", "part"], name="authority_sections_part")]

    def __str__(self) -> str:
        return self.identifier
