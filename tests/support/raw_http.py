"""HTTP/1.1 over a bare socket, for bodies no client library sends: a declared length that
never arrives, a chunked body held open. And what a server has spooled to its temp
directory: the bytes of regular files under it or held open in it (Python's temp files are
unlinked at once, O_TMPFILE on Linux: only /proc/*/fd still names them)."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

BOUNDARY = "pgragboundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
WAIT_S = 10.0  # how long an answer is awaited: a server that waits for the body never sends one
FIRST_WAIT_S = 3.0  # for an answer to the head alone, before any of the body is sent


def file_part(size: int, name: str = "files", filename: str = "big.txt") -> bytes:
    """The head of a multipart body: one file part of `size` bytes (no closing boundary)."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; '
        f'filename="{filename}"\r\nContent-Type: text/plain\r\n\r\n'
    ).encode()
    return head + b"x" * size


@dataclass
class RawAnswer:
    status: int | None  # None: no answer while the body was held
    head: str
    body: bytes
    spooled: int  # bytes in the temp directory while the request was still open


def spooled_bytes(tmp: Path) -> int:
    """Bytes of the regular files under `tmp` or open (even unlinked) in it by any process."""
    seen: dict[tuple[int, int], int] = {}
    for path in tmp.rglob("*"):
        with contextlib.suppress(OSError):
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                seen[(st.st_dev, st.st_ino)] = st.st_size
    prefix = str(tmp)
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd).startswith(prefix):
                        st = fd.stat()
                        if stat.S_ISREG(st.st_mode):
                            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def _answered(sock: socket.socket, timeout: float) -> bool:
    readable, _, _ = select.select([sock], [], [], timeout)
    return bool(readable)


def _read(sock: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and len(data) > 200_000:
                break
    return data


def post_raw(
    base: str,
    path: str,
    headers: dict[str, str],
    pieces: Iterable[bytes],
    *,
    tmp: Path,
    chunked: bool = False,
) -> RawAnswer:
    """POST the head, then `pieces` of the body for as long as the server has not answered,
    then hold the connection (the body unfinished) until it answers or WAIT_S passes."""
    host = urlsplit(base).netloc
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    hostname, port = host.rsplit(":", 1)
    with socket.create_connection((hostname, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        for i, piece in enumerate(pieces):
            if _answered(sock, FIRST_WAIT_S if i == 0 else 0.05):
                break
            data = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
            try:
                sock.sendall(data)
            except OSError:  # the server answered and closed
                break
        _answered(sock, WAIT_S)
        spooled = spooled_bytes(tmp)
        raw = _read(sock)
    head, _, body = raw.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    status = int(text.split()[1]) if text.startswith("HTTP/") else None
    return RawAnswer(status, text, body, spooled)


def split(data: bytes, size: int = 256 * 1024) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]
