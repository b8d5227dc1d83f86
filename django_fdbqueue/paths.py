"""Queue names inside URL paths, shared by the REST API and the admin pages.

Queue names may be "." or "..", which HTTP clients and browsers collapse as dot segments of a
path (even when written as "%2E"). Those two names therefore travel as "~." and "~.."; "~" never
occurs in a queue name, so every other name is its own path segment.
"""

from __future__ import annotations

DOT_NAMES = (".", "..")
ESCAPE = "~"


def name_to_segment(name: str) -> str:
    """The path segment that names `name`."""
    return ESCAPE + name if name in DOT_NAMES else name


def segment_to_name(segment: str) -> str:
    """The queue name a path segment stands for (validation is the service's job)."""
    if segment.startswith(ESCAPE) and segment[len(ESCAPE) :] in DOT_NAMES:
        return segment[len(ESCAPE) :]
    return segment


class QueueNameConverter:
    """A path converter for queue names: ``path("<fdbqueue_name:name>/", ...)``."""

    regex = r"~?[A-Za-z0-9._-]{1,200}"

    def to_python(self, value: str) -> str:
        return segment_to_name(value)

    def to_url(self, value: str) -> str:
        return name_to_segment(value)
