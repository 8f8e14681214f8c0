"""The ranking page's guard at the HTTP layer: the security headers every answer carries, the request framing the app
refuses beyond what h11 checks, and one JSON refusal or 500 answer, logged as one line, for every error
(:mod:`sarnmt.human.app` is the app it wraps)."""

from __future__ import annotations

import json

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from sarnmt.human.server import brief, log

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
)
MAX_HEADERS = 100
MAX_TARGET = 64 * 1024  # bytes of a request's path and query
JSON = "application/json; charset=utf-8"


def json_response(status: int, data: dict, close: bool = False) -> Response:
    headers = {"Connection": "close"} if close else None
    return Response(json.dumps(data, ensure_ascii=False).encode(), status, headers, media_type=JSON)


def refused(request: Request, status: int, message: str, close: bool = False) -> Response:
    """A refusal: JSON ``{"error": message}``, logged as one line."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    client = request.client and (request.client.host, request.client.port)
    log(client, f'"{request.method} {target[:200]}" {status} {message}')
    return json_response(status, {"error": message}, close)


def framing(scope, max_head: int) -> tuple[int, str] | None:
    """What h11 lets through that this app refuses: a target over :data:`MAX_TARGET` bytes (414), headers over
    ``max_head`` bytes (h11 bounds only a head that arrives in pieces) or more than :data:`MAX_HEADERS` of them
    (431), and both ``Content-Length`` and ``Transfer-Encoding`` (400: RFC 9112, 6.3, a request that may be read two
    ways, the way requests are smuggled past a proxy)."""
    target = len(scope["raw_path"]) + len(scope["query_string"])
    if target > MAX_TARGET:
        return 414, f"request target over {MAX_TARGET} bytes"
    headers = scope["headers"]
    if len(headers) > MAX_HEADERS:
        return 431, f"more than {MAX_HEADERS} headers"
    if sum(len(k) + len(v) + 4 for k, v in headers) > max_head:
        return 431, f"request headers over {max_head} bytes"
    names = {k for k, _ in headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        return 400, "a request with both Content-Length and Transfer-Encoding is refused (it can be read two ways)"
    return None


class Guard:
    """ASGI middleware around the app: every answer gets :data:`SECURITY_HEADERS`; requests refused by
    :func:`framing` are answered so; an unexpected error is answered 500 (when nothing was sent yet) with one log
    line, never a traceback."""

    def __init__(self, app, max_head: int):
        self.app = app
        self.max_head = max_head
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_secured(message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        try:
            bad = framing(scope, self.max_head)
            if bad is not None:
                await refused(Request(scope), *bad, close=True)(scope, receive, send_secured)
                return
            await self.app(scope, receive, send_secured)
        except ClientDisconnect:
            return
        except Exception as err:
            log(scope.get("client"), f'"{scope["method"]} {scope["path"][:200]}" error: {brief(err)}')
            if not started:
                response = json_response(500, {"error": "internal error (the server logged it)"}, close=True)
                await response(scope, receive, send_secured)
