"""Legacy and OpenDocument office formats (.doc, .ppt, .rtf, .odt, .odp) via LibreOffice.

No maintained pure-Python reader handles these well, so when `soffice` is installed we
convert to the OOXML equivalent in a temporary directory and reuse those parsers;
otherwise the error says what to install. The document keeps its own file type.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable

from pgrag.errors import ErrorCode

from .base import ParsedDocument, ParseError, Source
from .limits import check_zip

TARGET = {
    "doc": "docx",
    "rtf": "docx",
    "odt": "docx",
    "ppt": "pptx",
    "odp": "pptx",
    "xls": "xlsx",
    "ods": "xlsx",
}
TIMEOUT_S = 120


def soffice() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def parse(src: Source, parse_target: Callable[[Source], ParsedDocument]) -> ParsedDocument:
    """Convert the file with LibreOffice and parse the result with `parse_target`."""
    ext = src.ext
    target = TARGET[ext]
    binary = soffice()
    if binary is None:
        raise ParseError(
            ErrorCode.UNSUPPORTED_FORMAT,
            f".{ext} files need LibreOffice: install it (apt install libreoffice-core) "
            f"to ingest .{ext} files, or save the file as .{target}",
        )
    with tempfile.TemporaryDirectory(prefix="pgrag-convert-") as tmp:
        work = pathlib.Path(tmp)
        source = work / f"source.{ext}"  # plain ASCII name: predictable output name
        src.file.seek(0)
        with source.open("wb") as copy:
            shutil.copyfileobj(src.file, copy)
        command = [
            binary,
            # own profile: no clash with a running soffice or a locked user profile
            f"-env:UserInstallation={(work / 'profile').as_uri()}",
            "--headless",
            "--norestore",
            "--convert-to",
            target,
            "--outdir",
            str(work / "out"),
            str(source),
        ]
        try:
            done = subprocess.run(command, capture_output=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ParseError(
                ErrorCode.CORRUPT_FILE,
                f"LibreOffice did not convert the .{ext} file within {TIMEOUT_S} s",
            ) from None
        converted = work / "out" / f"source.{target}"
        if not converted.is_file() or converted.stat().st_size == 0:
            reason = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-300:]
            raise ParseError(
                ErrorCode.CORRUPT_FILE,
                f"LibreOffice could not convert the .{ext} file: {reason or 'no output'}",
            )
        with converted.open("rb") as f:  # our own file: LibreOffice's output
            check_zip(f)
            parsed = parse_target(Source(converted, f))
    parsed.file_type = ext
    parsed.outline["type"] = ext
    parsed.outline["converted_to"] = target
    parsed.metadata["converted_with"] = "libreoffice"
    return parsed
