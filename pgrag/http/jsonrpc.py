"""The JSON-RPC front door of /mcp: what the SDK's transports would hang on, or answer with
plain text or a pydantic dump, is answered here with the spec's error object instead.

Checked before a POST reaches the SDK: the Content-Type, that the body parses and nests at
most MAX_DEPTH levels (-32700), that it is one JSON-RPC 2.0 message and not a batch (-32600:
MCP 2025-06-18 removed batching), that a request's id is a string or an integer (`id: null`
or `1.5` used to get 202 and no answer: the client hung) and that params is an object
(-32602). Also whether the request asked for progress (params._meta.progressToken) and
accepts a stream, which picks the transport (mcp_mode.py)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_DEPTH = 64  # no tool takes arguments nested nearly as deep; validating deeper recurses

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class Rejection:
    status: int
    code: int
    message: str
    id: str | int | None = None


TOO_DEEP = Rejection(400, PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH} levels")


@dataclass(frozen=True)
class Checked:
    rejection: Rejection | None
    wants_progress: bool = False
    tool: str | None = None  # the tool a tools/call request names
    id: str | int | None = None


def _header(scope: MutableMapping[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _too_deep(value: Any) -> bool:
    """Is `value` nested deeper than MAX_DEPTH? Walked with a stack, not by recursion."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def check_post(scope: MutableMapping[str, Any], body: bytes) -> Checked:
    """Whether this POST is one well-formed JSON-RPC message, and if it asks for progress."""
    media = _header(scope, b"content-type").split(";", 1)[0].strip().lower()
    if media != "application/json":
        return Checked(Rejection(415, INVALID_REQUEST, "Content-Type must be application/json"))
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return Checked(Rejection(400, PARSE_ERROR, f"Parse error: {exc}"))
    except RecursionError:  # nested past what the parser recurses into
        return Checked(TOO_DEEP)
    if _too_deep(message):
        return Checked(TOO_DEEP)
    if isinstance(message, list):
        return Checked(
            Rejection(
                400,
                INVALID_REQUEST,
                "Invalid Request: batches are not supported; send one JSON-RPC message per POST",
            )
        )
    if not isinstance(message, dict):
        return Checked(
            Rejection(400, INVALID_REQUEST, "Invalid Request: the body must be a JSON object")
        )
    msg_id = message.get("id")
    echo = msg_id if _valid_id(msg_id) else None
    if message.get("jsonrpc") != "2.0":
        return Checked(
            Rejection(400, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', echo)
        )
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return Checked(
                Rejection(400, INVALID_REQUEST, 'Invalid Request: "method" must be a string', echo)
            )
        if "id" in message and not _valid_id(msg_id):
            return Checked(
                Rejection(
                    400, INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'
                )
            )
        params = message.get("params")
        if "params" in message and not isinstance(params, dict):
            return Checked(
                Rejection(400, INVALID_PARAMS, 'Invalid params: "params" must be an object', echo)
            )
        meta = params.get("_meta") if isinstance(params, dict) else None
        asks = "id" in message and isinstance(meta, dict) and "progressToken" in meta
        accepts_stream = "text/event-stream" in _header(scope, b"accept").lower()
        name = params.get("name") if isinstance(params, dict) else None
        tool = name if message["method"] == "tools/call" and isinstance(name, str) else None
        return Checked(None, wants_progress=asks and accepts_stream, tool=tool, id=echo)
    if not _valid_id(msg_id) or ("result" in message) == ("error" in message):
        return Checked(
            Rejection(
                400,
                INVALID_REQUEST,
                'Invalid Request: a message needs a "method", or an "id" and a "result" or an '
                '"error"',
                echo,
            )
        )
    return Checked(None)


async def send_error(
    send: Send,
    status: int,
    code: int,
    message: str,
    *,
    id: str | int | None = None,
    data: dict[str, Any] | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """One JSON-RPC error response, as its own HTTP response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": id, "error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


ASGIApp = Callable[[MutableMapping[str, Any], Any, Send], Awaitable[None]]


class QuietRejections:
    """The SDK's GET /sse answers a refused request (foreign Host or Origin) itself and then
    raises, which logged two ERROR tracebacks per refusal. A refusal is the client's error:
    the answer stands and nothing is raised."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Send) -> None:
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except ValueError as exc:
            if not started or str(exc) != "Request validation failed":
                raise
