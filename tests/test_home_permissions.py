"""A PGRAG_HOME another user can write to is refused (home.py): the home, the folders pgrag
trusts in it (models, uploads, OCR cache, parse markers) and each upload folder must be
pgrag's own and not group- or world-writable. One line, a stable code, no traceback."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from tests.support.commands import pgrag_cmd
from tests.support.kb_server import http_server

NOBODY = 65534


def _status(dsn: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env["PGRAG_HOME"] = str(home)
    return subprocess.run(
        pgrag_cmd("--database-url", dsn, "--embedding-model", "hash/384", "status"),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _home_writable(home: Path) -> Path:
    home.chmod(0o777)
    return home


def _models_writable(home: Path) -> Path:
    (home / "models").mkdir(mode=0o700)
    (home / "models").chmod(0o775)
    return home / "models"


def _upload_folder_of_another_user(home: Path) -> Path:
    folder = home / "uploads" / "0123456789abcdef"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    return folder


def _home_of_another_user(home: Path) -> Path:
    os.chown(home, NOBODY, NOBODY)
    return home


def _parent_writable(home: Path) -> Path:
    home.parent.chmod(0o777)  # no sticky bit: anyone may swap the home itself
    return home.parent


@pytest.mark.parametrize(
    "spoil",
    [
        _home_writable,
        _models_writable,
        _upload_folder_of_another_user,
        _home_of_another_user,
        _parent_writable,
    ],
)
def test_a_home_others_can_write_to_is_refused(
    dsn: str, tmp_path: Path, spoil: Callable[[Path], Path]
) -> None:
    home = tmp_path / "outer" / "home"
    home.mkdir(parents=True, mode=0o700)
    assert _status(dsn, home).returncode == 0  # a private home is used
    culprit = spoil(home)
    refused = _status(dsn, home)
    assert refused.returncode == 1, refused.stdout
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgrag: UNSAFE_PERMISSIONS: "), lines
    assert str(culprit) in lines[0] and "Traceback" not in refused.stderr


def test_a_sticky_shared_parent_is_fine(dsn: str, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: others cannot rename the home away
    (shared / "home").mkdir(mode=0o700)
    assert _status(dsn, shared / "home").returncode == 0


def test_an_upload_into_a_folder_made_writable_since_the_start_is_refused(
    dsn: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write", "PGRAG_HOME": str(home)}
    with (
        http_server(dsn, "--embedding-model", "hash/384", env=env) as server,
        httpx2.Client(base_url=server.base, timeout=60) as api,
    ):
        first = api.post("/api/documents", files={"file": ("a.md", b"# A\n\nfirst", "text/plain")})
        assert first.status_code == 202, first.text
        (folder,) = (home / "uploads").iterdir()
        folder.chmod(0o777)  # another user could now swap what pgrag ingests
        r = api.post("/api/documents", files={"file": ("b.md", b"# B\n\nsecond", "text/plain")})
        assert r.status_code == 503 and r.json()["errorCode"] == "UNSAFE_PERMISSIONS", r.text
    assert not (folder / "b.md").exists()
