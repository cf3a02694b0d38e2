"""The scope-leak matrix (SPEC §7): a key limited to collection A (`other`)
aims every tool, resource and REST route at collections B (`kb`, `bulk`): reads by id, path
and file name, searches whose only matches are in B (keyword, exact, regex, semantic,
hybrid), listings and folders, paging with continuation tokens the full key minted for B,
and inference through counts, statuses and error messages. Nothing of B may come back:

- no B document id, path, file name, title, folder or B-only word anywhere in the
  serialized response (unless the caller sent it: an error may echo the id it was given);
- no count above what A holds (`total_matches`, `total`, status counts...);
- an error for a B document is byte for byte the error for a document that does not exist.

The matrix is checked against the servers themselves: every tool of `tools/list`, every
resource template and every route of `/openapi.json` must have probes here, so a new one
cannot skip the check. Each attack is repeated with the full key, which must see B there
(the attack aims at something real) or, where no collection data can show (embeddings,
charts, the web, writes), simply succeed; and each tool has a control that a limited key
passes with its own data, so the matrix cannot pass because everything fails. Graph tools
are the exception: graph data belongs to no collection, so a limited key is refused them.

Deployments (one server each, started once for the module):
- `core`: the shared kb_http server (tests/support/kb_server.py), toolset core.
- `compat`: the same database with `rag,ldims,graph,chart,web` (rag excludes core) and a
  local SearXNG stand-in; graph rows linked to A's and B's documents exist for the module.
- `writable`: its own small database (hash embeddings), `core,write,graph`,
  PGRAG_READ_ONLY=false, writing to collection kb, plus a key limited to kb that attacks
  `other` through the write tools."""

from __future__ import annotations

import pytest

from tests.support.scope_leaks import (
    DEPLOYMENT_TOOLSETS,
    Probe,
    anyio_backend,  # noqa: F401 (a fixture)
)
from tests.support.scope_leaks_checks import (
    check_coverage,
    check_probe,
    deployment,  # noqa: F401 (a fixture)
    writable,  # noqa: F401 (a fixture)
)
from tests.support.scope_leaks_probes import (
    CASES,
    NO_SCOPED_CONTROL,
    PROBES,
    Deployment,
    compat,  # noqa: F401 (a fixture)
    core,  # noqa: F401 (a fixture)
)

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("where", "probe"), CASES, ids=[f"{w}:{p.id}" for w, p in CASES])
async def test_probe(probe: Probe, deployment: Deployment) -> None:
    await check_probe(deployment, probe)


def test_every_probed_tool_has_an_attack_and_a_control() -> None:
    """Attacks without controls could pass by refusing everything."""
    targets = {p.target for p in PROBES}
    for target in targets:
        mine = [p for p in PROBES if p.target == target]
        assert any(not p.is_control for p in mine), f"{target}: no attack"
        assert any(p.is_control for p in mine) or target in NO_SCOPED_CONTROL, (
            f"{target}: no control with A's data"
        )
    assert set(NO_SCOPED_CONTROL) <= targets


@pytest.mark.parametrize("where", list(DEPLOYMENT_TOOLSETS))
async def test_every_tool_resource_and_route_is_in_the_matrix(
    where: str, deployment: Deployment
) -> None:
    """What the server offers is what the matrix probes: a new tool, resource template or
    REST route fails here until it has probes."""
    await check_coverage(where, deployment)
