"""The human evaluation's refusals: what the store, the app and the task files raise for a request or a file they
refuse, and how a value a client gave is quoted in the message."""

from __future__ import annotations

from sarnmt.errors import InputError


class StoreError(InputError):
    """A database that is missing or not a human-evaluation database, or a request the store refuses (unknown
    annotator or item, incomplete ranking); the message says which."""


class UnknownAnnotator(StoreError):
    """No annotator has the token given."""


def show(value: object, limit: int = 60) -> str:
    """A value a client gave, for a message: its repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
