"""Request body limits: size, enforced while the body streams in (not after), and the
nesting depth of a JSON body, checked before anything parses it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from starlette.exceptions import HTTPException

from suture.documents import MAX_RECORD_DEPTH

#: deepest nesting of arrays and objects a JSON body (or a JSON form field) may have: a
#: document record's (far beyond any real request, far below what would exhaust a
#: parser's recursion)
MAX_JSON_DEPTH = MAX_RECORD_DEPTH
#: bytes scanned at a time by `json_depth`, so a body of any size needs little memory
_BLOCK = 1 << 18
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPENING, _CLOSING = (ord("["), ord("{")), (ord("]"), ord("}"))


class BodyTooLarge(HTTPException):
    """Raised while reading a body past the limit (answered as JSON 413 by the app)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, too_large_message(max_bytes))


def too_large_message(max_bytes: int) -> str:
    return (f"the request body is over this server's limit of {max_bytes} bytes "
            "(suture serve --max-body-mb)")


class BodyLimit:
    """ASGI middleware answering 413 to bodies over `max_bytes`.

    A declared Content-Length over the limit is refused before reading; a body sent
    without one (chunked) is counted as it arrives and cut off at the limit.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def counted() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max:
                    raise BodyTooLarge(self._max)
            return message

        async def tracked(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._app(scope, counted, tracked)
        except BodyTooLarge:  # raised outside the app's handlers
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        await _answer(send, 413, "too_large", too_large_message(self._max))


class JsonRefused(ValueError):
    """A JSON text nested too deep or not JSON at all; the message says which."""


def json_depth(text: str | bytes) -> int:
    """How deep arrays and objects nest in JSON `text` (0: a bare value), without parsing
    it: the running count of the brackets outside strings (a quote after an odd run of
    backslashes is escaped). Linear with numpy, whatever the text: no pattern to rescan.
    An unbalanced text counts its opening brackets, as a parser would recurse into them;
    bytes are read as UTF-8 (whose multi-byte characters hold no ASCII byte)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") == 0:
        return 0
    data = np.frombuffer(raw, dtype=np.uint8)
    escapes = b"\\" in raw  # without any, every quote opens or closes a string
    depth = deepest = 0
    backslashes = 0  # the run of backslashes that ended the previous block
    inside = False  # whether the previous block ended inside a string
    for start in range(0, len(data), _BLOCK):
        block = data[start:start + _BLOCK]
        quotes = block == _QUOTE
        if escapes:
            where = np.arange(len(block), dtype=np.int32)
            # the last byte that is no backslash at or before each position (a run
            # carried over from the previous block reaches back before this one)
            last = np.maximum.accumulate(
                np.where(block == _BACKSLASH, np.int32(-1 - backslashes), where))
            before = np.concatenate((np.array([-1 - backslashes], dtype=np.int32), last[:-1]))
            quotes &= (where - before) & 1 == 1  # an even run of backslashes before it
            backslashes = len(block) - 1 - int(last[-1])
        quoted = np.cumsum(quotes, dtype=np.int32)
        outside = (quoted - quotes + inside) & 1 == 0
        steps = (((block == _OPENING[0]) | (block == _OPENING[1])) & outside).astype(np.int32)
        steps -= ((block == _CLOSING[0]) | (block == _CLOSING[1])) & outside
        running = np.cumsum(steps, dtype=np.int64) + depth
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
        inside = bool((int(quoted[-1]) + inside) & 1)
    return deepest


def check_json_depth(text: str | bytes, what: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise `JsonRefused` when `text` nests deeper than `max_depth` (`what`: "the body",
    "the metadata field", for the message)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") <= max_depth:  # cannot nest deeper: no scan
        return
    depth = json_depth(raw)
    if depth > max_depth:
        raise JsonRefused(
            f"{what} nests arrays and objects {depth} levels deep; this server accepts at "
            f"most {max_depth}")


def read_json(raw: bytes | str, what: str = "the body") -> Any:
    """Parse a JSON text after checking its depth; every failure is a `JsonRefused`
    naming the problem (bad UTF-8, bad syntax, a number of thousands of digits, ...)."""
    try:
        text = raw if isinstance(raw, str) else raw.decode(json.detect_encoding(raw),
                                                           "surrogatepass")
        check_json_depth(text, what)
        return json.loads(text)
    except JsonRefused:
        raise
    except (ValueError, RecursionError) as exc:
        raise JsonRefused(f"{what} is not valid JSON: {exc}") from None


def is_json(content_type: str | None) -> bool:
    """Whether a body of this type is read as JSON: none given, application/json or
    application/*+json (the types FastAPI parses as JSON)."""
    if not content_type:
        return True
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/")
                                          and kind.endswith("+json"))


class JsonDepthLimit:
    """ASGI middleware answering 400 to a JSON body nested deeper than `max_depth`.

    The body (already bounded by `BodyLimit`, which sits outside) is read whole, its
    depth counted without parsing, and handed on unchanged: no parser on any route
    ever recurses into a hostile nesting.
    """

    def __init__(self, app: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
        self._app = app
        self._max = max_depth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", ())) if scope["type"] == "http" else {}
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if scope["type"] != "http" or not is_json(content_type):
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        last: Any = None
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                last = message
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            check_json_depth(_utf8(body), "the JSON body", self._max)
        except JsonRefused as exc:
            await _answer(send, 400, "invalid_request", str(exc))
            return
        pending = [{"type": "http.request", "body": body, "more_body": False}]
        if last is not None:
            pending.append(last)

        async def replay() -> Any:
            return pending.pop(0) if pending else await receive()

        await self._app(scope, replay, send)


def _utf8(body: bytes) -> bytes:
    """A JSON body as UTF-8 (JSON may come as UTF-16 or UTF-32); bytes that are no text
    are left to the route's parser to refuse."""
    if not body:
        return body
    encoding = json.detect_encoding(body)
    if encoding == "utf-8":
        return body
    try:
        return body.decode(encoding, "surrogatepass").encode("utf-8", "surrogatepass")
    except ValueError:
        return b""


async def _answer(send: Any, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["MAX_JSON_DEPTH", "BodyLimit", "BodyTooLarge", "JsonDepthLimit", "JsonRefused",
           "check_json_depth", "is_json", "json_depth", "read_json"]
