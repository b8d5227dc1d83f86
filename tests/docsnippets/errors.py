"""The failure a snippet reports: where (page and line) and what (expected against actual)."""

from __future__ import annotations


class SnippetFailure(AssertionError):
    """A block did not do what the page says; the message names the page and line."""

    def __init__(self, location: str, message: str) -> None:
        super().__init__(f"{location}: {message}")
        self.location = location
