"""Relay document changes to MCP clients as `notifications/resources/list_changed`.

Postgres is the bus: a statement trigger on pgrag.documents NOTIFYs `pgrag_documents`
(migration 0008), so changes made by any process reach every server; on Citus, where the
trigger cannot fire on the coordinator, pgrag's writers send the same NOTIFY there in the
change's transaction (pgrag/store/changes.py). Each server process LISTENs itself, so
several of them against one database all relay every change. Clients on the
2026-07-28 protocol get the event through `subscriptions/listen`; handshake-era sessions
(stdio, SSE, stateful HTTP) get the notification on their session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from mcp.shared.subscriptions import ResourcesListChanged

from pgrag.store import changes

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.5  # one notification per burst of document writes
MAX_SESSIONS = 1000
# a session whose client stopped reading must not hold up the others or the next change
SEND_TIMEOUT_S = 5.0


class ChangeRelay:
    def __init__(self, send_timeout_s: float = SEND_TIMEOUT_S) -> None:
        # strong references: the SDK hands out session objects that nothing else keeps;
        # a session that fails to take a notification in time is dropped
        self.sessions: dict[int, Any] = {}
        self.send_timeout_s = send_timeout_s
        self.bus: Any = None
        self.notified = 0
        self._state: tuple[int, int] | None = None  # documents_state when last announced

    def remember(self, session: Any) -> None:
        log.debug("remember session %r", type(session).__name__)
        if session is not None and hasattr(session, "send_resource_list_changed"):
            if len(self.sessions) >= MAX_SESSIONS:
                self.sessions.pop(next(iter(self.sessions)))
            self.sessions[id(session)] = session

    async def broadcast(self) -> None:
        self.notified += 1
        log.info("documents changed: notifying %d session(s)", len(self.sessions))
        if self.bus is not None:
            await self.bus.publish(ResourcesListChanged())
        sessions = list(self.sessions.items())
        delivered = await asyncio.gather(*(self._send(s) for _, s in sessions))
        for (key, _), ok in zip(sessions, delivered, strict=True):
            if not ok:
                self.sessions.pop(key, None)

    async def _send(self, session: Any) -> bool:
        """Whether the session took the notification in time (a closed one fails at once)."""
        try:
            async with asyncio.timeout(self.send_timeout_s):
                await session.send_resource_list_changed()
        except TimeoutError:
            log.info("a session took no notification within %g s: forgotten", self.send_timeout_s)
            return False
        except Exception:
            return False
        return True

    async def listen(self, dsn: str) -> None:
        """LISTEN until cancelled; reconnect when the database goes away."""
        pending = asyncio.Event()
        sender = asyncio.create_task(self._send_when(pending, dsn))
        try:
            while True:
                try:
                    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                        await changes.listen(conn)
                        if self._state is None:
                            self._state = await changes.documents_state(conn)
                        async for _ in conn.notifies():
                            pending.set()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.warning("change listener lost its connection; retrying", exc_info=True)
                    await asyncio.sleep(2)
        finally:
            sender.cancel()

    async def _send_when(self, pending: asyncio.Event, dsn: str) -> None:
        while True:
            await pending.wait()
            await asyncio.sleep(DEBOUNCE_S)
            pending.clear()
            try:
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                    state = await changes.documents_state(conn)
            except (psycopg.Error, OSError) as exc:  # cannot tell: announce rather than miss one
                log.warning("change relay could not read the documents' state: %s", exc)
                state = None
            if state is not None and state == self._state:
                continue
            self._state = state
            await self.broadcast()


@contextlib.asynccontextmanager
async def running_relay(dsn: str) -> AsyncIterator[ChangeRelay]:
    relay = ChangeRelay()
    task = asyncio.create_task(relay.listen(dsn))
    try:
        yield relay
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
