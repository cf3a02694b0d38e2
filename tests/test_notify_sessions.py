"""The change relay never waits on one MCP session: a session whose client stopped reading
is forgotten after the send timeout, a closed one at once, and the others are told."""

from __future__ import annotations

import asyncio

import pytest

from pgrag.mcp.notify import ChangeRelay

pytestmark = pytest.mark.anyio


class Session:
    """Stands in for an SDK server session: only the call the relay makes."""

    def __init__(self, behaviour: str = "takes") -> None:
        self.behaviour = behaviour
        self.told = 0

    async def send_resource_list_changed(self) -> None:
        if self.behaviour == "stalls":  # a client that stopped reading: the write never ends
            await asyncio.Event().wait()
        if self.behaviour == "closed":
            raise ConnectionResetError("closed")
        self.told += 1


async def test_a_stalled_session_holds_up_no_one_and_is_forgotten() -> None:
    relay = ChangeRelay(send_timeout_s=0.2)
    stalled, closed, first, second = (Session(b) for b in ("stalls", "closed", "takes", "takes"))
    for session in (first, stalled, closed, second):
        relay.remember(session)
    # the bound only keeps a regression from hanging the suite: a relay that waits on the
    # stalled session never returns
    await asyncio.wait_for(relay.broadcast(), timeout=30)
    assert (first.told, second.told) == (1, 1)
    assert set(relay.sessions) == {id(first), id(second)}
    await asyncio.wait_for(relay.broadcast(), timeout=30)
    assert (first.told, second.told) == (2, 2)
