"""Annotators' names: the policy of what a name may hold (no control character, bidirectional override or line
separator: names are printed one per line in the token list), how it is stored (NFC, trimmed), how it is printed
from an older database, and which names look like another (the same under NFKC and case folding)."""

from __future__ import annotations

import unicodedata

from sarnmt.human.errors import StoreError, show

# characters refused in an annotator's name: controls (newline, tab, ESC of an ANSI sequence), line and paragraph
# separators, surrogates, and the bidirectional overrides and isolates that reorder what a terminal shows
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_REFUSED_CATEGORIES = ("Cc", "Cs", "Zl", "Zp")
MAX_NAME = 100


def _refused(char: str) -> bool:
    return unicodedata.category(char) in _REFUSED_CATEGORIES or char in _BIDI


def annotator_name(name: object) -> str:
    """``name`` as stored: NFC-normalised (a name typed composed or decomposed is one name), spaces trimmed.

    :raises StoreError: empty, over :data:`MAX_NAME` characters, or holding a control character (names are printed
        one per line in the token list, where a newline or an escape sequence would forge a line)."""
    text = unicodedata.normalize("NFC", str(name)).strip()
    bad = next((c for c in text if _refused(c)), None)
    if bad is not None:
        raise StoreError(
            f"annotator name {show(text)} holds the control character U+{ord(bad):04X}: use letters, digits, spaces "
            "and punctuation"
        )
    if not text or len(text) > MAX_NAME:
        raise StoreError(f"annotator name must be 1-{MAX_NAME} characters, got {show(text)}")
    return text


def printable_name(name: str) -> str:
    """``name`` for one line of output: the characters :func:`annotator_name` refuses written as ``\\uXXXX`` (a
    database made before they were refused may hold them)."""
    return "".join(f"\\u{ord(c):04x}" if _refused(c) else c for c in name)


def lookalike(name: str, others: list[str]) -> str | None:
    """The first of ``others`` that differs from ``name`` but is the same under NFKC and case folding (``ａｎａ``,
    ``Ana`` and ``ana``): a likely typo for an existing annotator, or a name made to pass for one."""
    key = unicodedata.normalize("NFKC", name).casefold()
    return next((o for o in others if o != name and unicodedata.normalize("NFKC", o).casefold() == key), None)


LOOKALIKE_WARNING = (
    "warning: annotator {name} looks like {other} (the same under NFKC and case folding): two annotators now; if "
    "that was a typo, give the existing annotator's token instead"
)


def lookalike_warnings(names: list[str], first: int = 0) -> list[str]:
    """One warning line per name from ``names[first]`` on that looks like an earlier one (:func:`lookalike`): the
    names of a new task (``first`` 0), or those just added to a task's (``first``: how many it had)."""
    warnings = []
    for k in range(first, len(names)):
        other = lookalike(names[k], names[:k])
        if other is not None:
            warnings.append(LOOKALIKE_WARNING.format(name=show(names[k]), other=show(other)))
    return warnings
