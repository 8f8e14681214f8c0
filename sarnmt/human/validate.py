"""What the ranking page's API accepts from a client, checked before anything else reads it: the body (its
nesting, UTF-8, JSON, an object; its size, :data:`MAX_BODY`, is kept by :mod:`sarnmt.human.app` as it arrives), the
query string (known parameters, once each), whole numbers (ASCII digits in range). Every refusal is an
:class:`ApiError`, which the app answers as JSON with its status (400, or 413 for a body over :data:`MAX_BODY`);
nothing a client sends ends in an exception the server did not expect. The framing of a request (its line, its
headers, ``Content-Length`` or chunks) is h11's to check, before any of this (:mod:`sarnmt.human.server`)."""

from __future__ import annotations

import json
from http import HTTPStatus
from urllib.parse import parse_qsl

from sarnmt.human.errors import show

MAX_BODY = 64 * 1024  # bytes
MAX_DEPTH = 8  # nesting of [ and { in a body (a judgement needs 2)
MAX_DIGITS = 18  # a JSON integer (ids fit SQLite's 64 bits)
MAX_POSITION = 999_999_999


class ApiError(Exception):
    """A request refused: ``status`` and a message for the client; ``close`` when the connection must close (its
    body was not read)."""

    def __init__(self, status: HTTPStatus, message: str, close: bool = False):
        super().__init__(message)
        self.status, self.close = status, close


def nesting(raw: bytes, limit: int = MAX_DEPTH) -> int:
    """How deep ``[`` and ``{`` nest in JSON text (outside strings), counted up to ``limit + 1``."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return limit
    depth, deepest, in_string, escaped = 0, 0, False, False
    for byte in raw:  # UTF-8: a multi-byte character holds no ASCII byte, so '"', '\\' and brackets are themselves
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


class _Refused(ValueError):
    """JSON that parses but is refused: a huge integer, NaN, Infinity."""


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _Refused(f"a number of more than {MAX_DIGITS} digits ({len(text)} characters)")
    return int(text)


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not a number this API takes")


def json_object(raw: bytes) -> dict:
    """The body as a JSON object.

    :raises ApiError: nesting deeper than :data:`MAX_DEPTH`, bytes that are not UTF-8, text that is not JSON (or
        holds ``NaN``, ``Infinity``, an integer of more than :data:`MAX_DIGITS` digits), not an object, or text
        that is not Unicode (a lone surrogate escaped as ``\\ud800``).
    """
    if nesting(raw) > MAX_DEPTH:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"request body nests [ and {{ deeper than {MAX_DEPTH} levels")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"request body is not UTF-8 (byte {err.start})") from None
    try:
        data = json.loads(text or "null", parse_int=_integer, parse_constant=_constant)
    except _Refused as err:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"request body refused: {err}") from None
    except (ValueError, RecursionError) as err:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"request body is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        message = "request body holds text that is not Unicode (a lone surrogate)"
        raise ApiError(HTTPStatus.BAD_REQUEST, message) from None
    return data


def fields(body: dict, allowed: tuple[str, ...], hints: dict[str, str] | None = None) -> dict:
    """:raises ApiError: ``body`` has a field not in ``allowed`` (with its hint, when ``hints`` has one)."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        hint = next((hints[k] for k in unknown if hints and k in hints), "")
        raise ApiError(HTTPStatus.BAD_REQUEST, f"unknown fields {show(unknown)}" + (f": {hint}" if hint else ""))
    return body


def query(text: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query string's parameters, each at most once and each one of ``allowed``.

    :raises ApiError: an unknown or repeated parameter, escapes that are not UTF-8, too many parameters.
    """
    try:
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict", max_num_fields=len(allowed) + 1)
    except ValueError as err:  # UnicodeDecodeError too
        raise ApiError(HTTPStatus.BAD_REQUEST, f"query string refused: {str(err)[:100]}") from None
    names = [name for name, _ in pairs]
    bad = sorted({n for n in names if n not in allowed or names.count(n) > 1})
    if bad:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"unknown or repeated parameters {show(bad)}; allowed: {allowed}")
    return dict(pairs)


def whole_number(text: str, name: str, low: int = 1, high: int = MAX_POSITION) -> int:
    """``text`` as a whole number in ``low..high``.

    :raises ApiError: anything but ASCII digits ('²', '١', '-1', '1.0', '') or a number out of range.
    """
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))) or not low <= int(text) <= high:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"{name} must be a whole number from {low} to {high}, got {show(text)}")
    return int(text)
