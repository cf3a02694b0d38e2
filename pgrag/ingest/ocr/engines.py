"""OCR engines behind one call: image in, text lines with confidences out.

Tesseract (apt `tesseract-ocr` + language packs) is preferred when installed: on rendered
multi-line pages at 300 dpi it read every line (CER 0.000) where RapidOCR dropped lines
(CER 0.228) and 3x faster (benchmarks/ingest/ocr.py). RapidOCR
(PP-OCRv4 ONNX models shipped in its wheel, Chinese + English) installs from PyPI alone
and is used when Tesseract or its language data is missing. Both run outside pgrag's
process (the `tesseract` binary; RapidOCR workers in `rapid.py`), so a page over its time
limit is killed, not left running.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Protocol

from PIL import Image

__all__ = ["Engine", "Line", "OcrUnavailable", "load", "timed_out"]
RAPIDOCR_LANGUAGES = frozenset({"chi_sim", "eng"})
INSTALL_HINT = (
    "install an OCR engine: `pip install rapidocr-onnxruntime` (Chinese + English, no "
    "system packages) or `apt install tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim`"
)


class OcrUnavailable(Exception):
    """No engine can read the configured languages; `message` says what to install."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Line:
    text: str
    confidence: float  # 0..1
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels


class Engine(Protocol):
    name: str

    def read(self, image: Image.Image, timeout_s: float) -> list[Line]:
        """The page's lines; raises TimeoutError (`timed_out`) after `timeout_s`."""
        ...


def timed_out(timeout_s: float) -> TimeoutError:
    return TimeoutError(f"OCR took longer than {timeout_s:g} s (PGRAG_OCR_PAGE_TIMEOUT_S)")


class TesseractEngine:
    """The `tesseract` binary in a subprocess: the time limit kills it for real."""

    name = "tesseract"

    def __init__(self, binary: str, languages: str) -> None:
        self.binary = binary
        self.languages = languages

    def read(self, image: Image.Image, timeout_s: float) -> list[Line]:
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, format="PNG")
        try:
            done = subprocess.run(
                [self.binary, "stdin", "stdout", "-l", self.languages, "--psm", "3", "tsv"],
                input=buffer.getvalue(),
                capture_output=True,
                timeout=timeout_s,
                check=False,
                env={**os.environ, "OMP_THREAD_LIMIT": "1"},
            )
        except subprocess.TimeoutExpired:
            raise timed_out(timeout_s) from None
        if done.returncode != 0:
            raise RuntimeError(done.stderr.decode("utf-8", "replace").strip()[-300:])
        return _tsv_lines(done.stdout.decode("utf-8", "replace"))


def _tsv_lines(tsv: str) -> list[Line]:
    """Words grouped back into Tesseract's own lines (block, paragraph, line)."""
    lines: dict[tuple[str, str, str], list[list[str]]] = {}
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        lines.setdefault((cols[2], cols[3], cols[4]), []).append(cols)
    out = []
    for words in lines.values():
        x0 = min(float(w[6]) for w in words)
        y0 = min(float(w[7]) for w in words)
        x1 = max(float(w[6]) + float(w[8]) for w in words)
        y1 = max(float(w[7]) + float(w[9]) for w in words)
        conf = sum(max(float(w[10]), 0.0) for w in words) / len(words) / 100
        out.append(Line(_join_words([w[11] for w in words]), conf, (x0, y0, x1, y1)))
    return out


def _join_words(words: list[str]) -> str:
    """Tesseract splits Chinese into one 'word' per character: no spaces between CJK."""
    text = ""
    for word in words:
        if text and not (_is_cjk(text[-1]) and _is_cjk(word[0])):
            text += " "
        text += word
    return text


def _is_cjk(ch: str) -> bool:
    return "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef"


def _tesseract_languages(binary: str) -> set[str]:
    try:
        done = subprocess.run([binary, "--list-langs"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {line.strip() for line in done.stdout.decode().splitlines()[1:] if line.strip()}


_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _rapid(threads: int) -> Engine:
    from .rapid import RapidEngine

    return RapidEngine(threads)


def load(engine: str, languages: str, workers: int) -> Engine:
    """The engine for `languages` ("chi_sim+eng"); `auto` prefers Tesseract. Raises
    OcrUnavailable naming what to install."""
    wanted = {lang for lang in languages.split("+") if lang}
    if engine == "off":
        raise OcrUnavailable("OCR is turned off (PGRAG_OCR_ENGINE=off); " + INSTALL_HINT)
    problems = []
    if engine in ("auto", "tesseract"):
        binary = shutil.which("tesseract")
        if binary is None:
            problems.append("tesseract is not installed")
        else:
            missing = wanted - _tesseract_languages(binary)
            if not missing:
                return TesseractEngine(binary, languages)
            packs = " ".join(f"tesseract-ocr-{m.replace('_', '-')}" for m in sorted(missing))
            problems.append(f"tesseract lacks the language data: apt install {packs}")
    if engine in ("auto", "rapidocr"):
        if not wanted <= RAPIDOCR_LANGUAGES:
            problems.append(
                f"RapidOCR reads only chi_sim+eng, not {'+'.join(sorted(wanted - RAPIDOCR_LANGUAGES))}"
            )
        else:
            try:
                with _lock:  # one engine, and its first worker, started at a time
                    return _rapid(max(1, (os.cpu_count() or 1) // max(1, workers)))
            except ImportError as exc:
                problems.append(
                    "rapidocr-onnxruntime is not installed"
                    if exc.name == "rapidocr_onnxruntime"
                    else f"RapidOCR did not start ({exc})"
                )
    raise OcrUnavailable(f"no OCR engine for {languages}: {'; '.join(problems)}; {INSTALL_HINT}")
