#!/usr/bin/env bash
# Container smoke test: builds the image from our Dockerfile with podman, runs it, and checks
# it from outside, one line per check; exits non-zero at the first failure.
#
#   scripts/container_smoke.sh            # as root, on a machine with podman + runc
#
# Checks: the image builds; /healthz; /readyz; the image's own HEALTHCHECK; `pgrag ingest`
# of examples/sample mounted read-only at /docs (a bind mount, as compose's `ingest` does);
# `search` over MCP (a JSON-RPC tools/call POSTed to /mcp, Streamable HTTP); no zombie in
# the container; `podman stop` (SIGTERM) ends it well within the grace period with exit code
# 0, the embedded PostgreSQL shut down cleanly (no postmaster.pid left in the volume) and
# none of the container's processes survives on the host.
#
# Base image: when docker.io/library/python:3.11.14-slim-bookworm is not in local storage
# (machines that cannot pull it; where you can, `podman pull` it first), a stand-in is built
# from Debian packages as ../shared/notes/containers.md describes: debootstrap (needs root)
# + python3 from bookworm, tagged with that name. It is kept for the next run, like the
# pgrag image (IMAGE, default localhost/pgrag:smoke; KEEP_IMAGE=0 removes it at the end).
# Everything else it creates (container, volume, temp dirs) is removed on exit, even on
# failure.
#
# Environment: PODMAN (default "podman --runtime runc"), IMAGE, KEEP_IMAGE, PORT (host port,
# default 18765), MIRROR (Debian mirror for the stand-in; default: the one apt uses).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=docker.io/library/python:3.11.14-slim-bookworm
DEBIAN_IMAGE=localhost/debian-bookworm-min:latest
IMAGE="${IMAGE:-localhost/pgrag:smoke}"
KEEP_IMAGE="${KEEP_IMAGE:-1}"
PORT="${PORT:-18765}"
read -r -a PODMAN <<<"${PODMAN:-podman --runtime runc}"
TAG="pgrag-smoke-$$"
CTR="$TAG"
VOL="$TAG-home"
WORK="$(mktemp -d /tmp/pgrag-smoke.XXXXXX)"
T0=$SECONDS

say() { printf '%-10s %s\n' "$1" "$2"; }
ok() { say ok "$1"; }
fail() {
  say FAIL "$1"
  if "${PODMAN[@]}" container exists "$CTR" 2>/dev/null; then
    echo "--- last container log lines:" >&2
    "${PODMAN[@]}" logs --tail 40 "$CTR" >&2 2>&1 || true
  fi
  exit 1
}

cleanup() {
  local rc=$?
  "${PODMAN[@]}" rm -f -t 0 "$CTR" >/dev/null 2>&1 || true
  "${PODMAN[@]}" volume rm -f "$VOL" >/dev/null 2>&1 || true
  if [[ "$KEEP_IMAGE" == 0 ]]; then "${PODMAN[@]}" rmi -f "$IMAGE" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
  if [[ $rc -eq 0 ]]; then
    say done "container smoke test passed in $((SECONDS - T0)) s"
  else
    say done "container smoke test FAILED (exit $rc) after $((SECONDS - T0)) s"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in podman runc curl python3; do
  command -v "$tool" >/dev/null || fail "prerequisite: $tool not found (apt-get install podman runc curl)"
done

# This machine kind: hybrid cgroups (crun refuses them; runc with cgroupfs works) and a
# sandbox that forbids raising RLIMIT_NOFILE/NPROC (no default ulimits). A private
# containers.conf unless the caller has one.
if [[ -z "${CONTAINERS_CONF:-}" && ! -e /etc/containers/containers.conf ]]; then
  cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
EOF
  export CONTAINERS_CONF="$WORK/containers.conf"
fi

# --- the base image, or its Debian stand-in ------------------------------------------------
if "${PODMAN[@]}" image exists "$BASE"; then
  ok "base image $BASE present"
else
  [[ "$(id -u)" -eq 0 ]] || fail "base image $BASE missing; building its stand-in needs root"
  t=$SECONDS
  if ! "${PODMAN[@]}" image exists "$DEBIAN_IMAGE"; then
    command -v debootstrap >/dev/null || fail "prerequisite: debootstrap not found"
    mirror="${MIRROR:-$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' \
      /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
      | head -1 | awk '{print $2}' || true)}"
    mirror="${mirror:-http://deb.debian.org/debian}"
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log" >&2; fail "debootstrap bookworm from $mirror"; }
    tar -C "$WORK/rootfs" -c . | "${PODMAN[@]}" import - "$DEBIAN_IMAGE" >/dev/null 2>&1 \
      || fail "podman import of the Debian root filesystem"
    rm -rf "$WORK/rootfs"
  fi
  mkdir -p "$WORK/base"
  cp /etc/ssl/certs/ca-certificates.crt "$WORK/base/ca-certificates.crt"
  # the host's CA bundle (registries are reached through a TLS proxy here): stand-in only
  cat >"$WORK/base/Containerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
      python3 python3-venv python-is-python3 ca-certificates >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
COPY ca-certificates.crt /etc/ssl/certs/host-ca-certificates.crt
ENV PIP_CERT=/etc/ssl/certs/host-ca-certificates.crt \\
    SSL_CERT_FILE=/etc/ssl/certs/host-ca-certificates.crt
EOF
  "${PODMAN[@]}" build -q --layers=false --network host -t "$BASE" "$WORK/base" >"$WORK/base.log" 2>&1 \
    || { tail -20 "$WORK/base.log" >&2; fail "build of the stand-in for $BASE"; }
  ok "stand-in for $BASE built from Debian bookworm in $((SECONDS - t)) s"
fi

# --- the image ------------------------------------------------------------------------------
# --format docker: podman's default OCI image format has no HEALTHCHECK and drops it
# --layers=false: no intermediate images pile up run after run (they would hardly be reused:
# the build stage copies pgrag/ and the README, so nearly every commit rebuilds it); the
# previous build of IMAGE is removed once the new one has its tag.
t=$SECONDS
old_id="$("${PODMAN[@]}" image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
"${PODMAN[@]}" build --format docker --layers=false --network host --pull=never -t "$IMAGE" . \
  >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; fail "podman build of the Dockerfile"; }
new_id="$("${PODMAN[@]}" image inspect -f '{{.Id}}' "$IMAGE")"
if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
  "${PODMAN[@]}" rmi "$old_id" >/dev/null 2>&1 || true
fi
ok "image $IMAGE built in $((SECONDS - t)) s ($(("$("${PODMAN[@]}" image inspect -f '{{.Size}}' "$IMAGE")" / 1000000)) MB)"

# --- a container: default command, a volume for PGRAG_HOME, the sample folder at /docs ----
mkdir -p "$WORK/docs"
cp -R examples/sample/. "$WORK/docs/"
chmod -R a+rX "$WORK" # the container runs as uid 10001
"${PODMAN[@]}" volume create "$VOL" >/dev/null || fail "podman volume create"
"${PODMAN[@]}" run -d --name "$CTR" -p "127.0.0.1:$PORT:8765" \
  -v "$VOL:/var/lib/pgrag" -v "$WORK/docs:/docs:ro" "$IMAGE" >/dev/null 2>"$WORK/run.log" \
  || { cat "$WORK/run.log" >&2; fail "podman run (default command, -p 127.0.0.1:$PORT:8765)"; }
URL="http://127.0.0.1:$PORT"

t=$SECONDS
wait_for() { # path, deadline (s): until it answers 200
  local path=$1 deadline=$2 code
  while ((SECONDS - t < deadline)); do
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL$path" || true)"
    [[ "$code" == 200 ]] && return 0
    "${PODMAN[@]}" container inspect -f '{{.State.Running}}' "$CTR" 2>/dev/null | grep -q true \
      || fail "container exited before $path answered"
    sleep 1
  done
  fail "$path did not answer 200 within ${deadline} s (last: $code)"
}
wait_for /healthz 120
ok "/healthz 200 after $((SECONDS - t)) s"
wait_for /readyz 180
ok "/readyz 200 after $((SECONDS - t)) s (embedded PostgreSQL in the volume)"

"${PODMAN[@]}" healthcheck run "$CTR" >/dev/null 2>&1 || fail "the image's HEALTHCHECK"
ok "image HEALTHCHECK healthy"

t=$SECONDS
n_files="$(find "$WORK/docs" -type f | wc -l)"
"${PODMAN[@]}" exec "$CTR" pgrag ingest /docs >"$WORK/ingest.log" 2>&1 \
  || { tail -20 "$WORK/ingest.log" >&2; fail "pgrag ingest /docs"; }
ok "pgrag ingest /docs ($n_files files of examples/sample, mounted read-only) in $((SECONDS - t)) s"

mcp_search() {
  curl -s --max-time 60 -X POST "$URL/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'Host: pgrag.example:8765' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"How do I create an HNSW index with pgvector?","limit":3}}}'
}
body="$(mcp_search)" || fail "POST /mcp tools/call search: no answer"
python3 - "$body" <<'EOF' || fail "MCP search: unexpected answer: ${body:0:400}"
import json, sys
reply = json.loads(sys.argv[1])
result = reply["result"]
assert not result.get("isError"), result
text = json.dumps(result)
assert "postgres-pgvector-guide" in text, "no hit from postgres-pgvector-guide.md"
EOF
ok "MCP tools/call search over /mcp (any Host on 0.0.0.0) finds postgres-pgvector-guide.md"

# --- processes, then a clean stop -------------------------------------------------------------
procs="$("${PODMAN[@]}" exec "$CTR" python -c '
import os
for p in sorted(os.listdir("/proc"), key=lambda s: (len(s), s)):
    if not p.isdigit():
        continue
    try:
        stat = open(f"/proc/{p}/stat").read()
    except OSError:
        continue
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    print(p, ppid, state, stat[stat.index("(") + 1 : stat.rindex(")")])
')" || fail "listing the container's processes"
if grep -qE '^[0-9]+ [0-9]+ Z ' <<<"$procs"; then
  echo "$procs" >&2
  fail "zombie processes in the container"
fi
grep -qE '^1 0 [A-Z] pgrag$' <<<"$procs" || { echo "$procs" >&2; fail "PID 1 is not pgrag"; }
grep -q postgres <<<"$procs" || { echo "$procs" >&2; fail "no embedded postgres process"; }
ok "processes: pgrag is PID 1, $(grep -c postgres <<<"$procs") postgres, no zombie"

host_pids="$("${PODMAN[@]}" top "$CTR" hpid | tail -n +2 | tr -s ' \n' ' ')"
datadir="$("${PODMAN[@]}" volume inspect -f '{{.Mountpoint}}' "$VOL")"
t=$SECONDS
# (without systemd, podman logs that it cannot manage the healthcheck timer: run.log, stop.log)
"${PODMAN[@]}" stop -t 30 "$CTR" >/dev/null 2>"$WORK/stop.log" || { cat "$WORK/stop.log" >&2; fail "podman stop"; }
took=$((SECONDS - t))
code="$("${PODMAN[@]}" container inspect -f '{{.State.ExitCode}}' "$CTR")"
[[ "$code" == 0 ]] || fail "exit code after SIGTERM: $code (want 0)"
((took < 25)) || fail "podman stop took $took s: SIGTERM was not enough"
left=""
for p in $host_pids; do
  if kill -0 "$p" 2>/dev/null; then left+=" $p"; fi
done
[[ -z "$left" ]] || fail "processes left on the host after stop:$left"
pidfiles="$(find "$datadir" -name postmaster.pid 2>/dev/null)"
[[ -z "$pidfiles" ]] || fail "postmaster.pid left behind (PostgreSQL not shut down): $pidfiles"
ok "podman stop (SIGTERM): exit 0 in $took s, no process left ($(wc -w <<<"$host_pids") were running), PostgreSQL shut down cleanly"
