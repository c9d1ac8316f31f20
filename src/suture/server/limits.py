"""Request body size limit, enforced while the body streams in (not after)."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException


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
        body = json.dumps({"error": "too_large", "message": too_large_message(self._max)}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["BodyLimit", "BodyTooLarge"]
