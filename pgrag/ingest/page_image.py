"""A page of a PDF or an image file as a small PNG (the console's page preview), rendered in
a child process (`python -m pgrag.ingest.page_image KIND PAGE MAX_SIDE MEMORY_MB`, the
file on stdin, the PNG on stdout) so that a hostile file can cost neither the server's
memory (RLIMIT_AS) nor its time (the parent kills a render past its limit)."""

from __future__ import annotations

import io
import resource
import sys
from enum import StrEnum

from PIL import Image, ImageOps

from pgrag.ingest.parsers.image import EXTENSIONS as IMAGE_EXTENSIONS
from pgrag.ingest.parsers.limits import MAX_IMAGE_PIXELS

Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS


class PageKind(StrEnum):
    PDF = "pdf"
    IMAGE = "image"


def page_kind(file_type: str) -> PageKind | None:
    """What renders a file type's pages; None: it has no page to show."""
    if file_type == "pdf":
        return PageKind.PDF
    return PageKind.IMAGE if file_type in IMAGE_EXTENSIONS else None


class NoSuchPage(Exception):
    """The page number is past the file's last page."""


def render(data: bytes, kind: PageKind, page: int, max_side: int) -> bytes:
    """Page `page` (1-based) as a PNG at most `max_side` pixels on its longer side."""
    image = _pdf_page(data, page, max_side) if kind == PageKind.PDF else _frame(data, page)
    image.thumbnail((max_side, max_side))
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _pdf_page(data: bytes, page: int, max_side: int) -> Image.Image:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    try:
        if not 1 <= page <= len(pdf):
            raise NoSuchPage(f"the PDF has {len(pdf)} page(s)")
        p = pdf[page - 1]
        width, height = p.get_size()  # points
        scale = min(2.0, max_side / max(width, height, 1))
        image: Image.Image = p.render(scale=scale).to_pil().convert("RGB")
        return image
    finally:
        pdf.close()


def _frame(data: bytes, page: int) -> Image.Image:
    with Image.open(io.BytesIO(data)) as img:
        frames = getattr(img, "n_frames", 1)
        if not 1 <= page <= frames:
            raise NoSuchPage(f"the image has {frames} frame(s)")
        img.seek(page - 1)
        return ImageOps.exif_transpose(img.convert("RGB"))


def main(argv: list[str]) -> int:
    """Exit 0 with the PNG on stdout, 3 for a page past the end (its reason on stderr),
    1 for a file that does not render."""
    kind, page, max_side, memory_mb = PageKind(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    limit = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    data = sys.stdin.buffer.read()
    try:
        png = render(data, kind, page, max_side)
    except NoSuchPage as exc:
        sys.stderr.write(str(exc))
        return 3
    except Exception as exc:  # the file's fault: the parent reports it
        sys.stderr.write(f"{type(exc).__name__}: {exc}"[:500])
        return 1
    sys.stdout.buffer.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
