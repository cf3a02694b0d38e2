"""Writing one generated document (benchmarks/ingest/kbtext.py) as an office file, byte for byte
the same on every build: fixed creation dates, zip entry times (docbench's normaliser) and
reportlab's invariant mode.

A section becomes a heading and paragraphs (docx, md, txt, html), a slide (pptx), half a PDF
page, or a block of table rows (xlsx, csv: one row per sentence).
"""

from __future__ import annotations

import csv
import html
import io
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docx import Document as new_docx
from kbtext import DocText, Lang
from openpyxl import Workbook
from pptx import Presentation as new_pptx
from pptx.util import Inches, Pt
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import simpleSplit
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docbench"))
from kbcommon import normalise_ooxml

CREATED = datetime(2025, 1, 1, 9, 0, 0, tzinfo=UTC)
PARAGRAPH = 4  # sentences per paragraph
_CJK_FONT = "STSong-Light"  # reportlab's built-in CID font: no font file needed
pdfmetrics.registerFont(UnicodeCIDFont(_CJK_FONT))


def _paragraphs(sentences: list[str], lang: Lang) -> list[str]:
    glue = "" if lang is Lang.ZH else " "
    return [glue.join(sentences[i : i + PARAGRAPH]) for i in range(0, len(sentences), PARAGRAPH)]


def write_txt(doc: DocText, path: Path) -> None:
    parts = [doc.title, ""]
    for s in doc.sections:
        parts += [s.heading, "", *(p + "\n" for p in _paragraphs(s.sentences, doc.lang))]
    path.write_text("\n".join(parts), encoding="utf-8")


def write_md(doc: DocText, path: Path) -> None:
    parts = [f"# {doc.title}", ""]
    for n, s in enumerate(doc.sections):
        parts += [f"## {s.heading}", ""]
        if n % 3 == 2:  # some sections are lists
            parts += [f"- {line}" for line in s.sentences] + [""]
        else:
            parts += [p + "\n" for p in _paragraphs(s.sentences, doc.lang)]
    path.write_text("\n".join(parts), encoding="utf-8")


def write_html(doc: DocText, path: Path) -> None:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="{"zh" if doc.lang is Lang.ZH else "en"}"><head><meta charset="utf-8">',
        f"<title>{e(doc.title)}</title></head><body>",
        f"<h1>{e(doc.title)}</h1>",
    ]
    for s in doc.sections:
        parts.append(f"<h2>{e(s.heading)}</h2>")
        parts += [f"<p>{e(p)}</p>" for p in _paragraphs(s.sentences, doc.lang)]
    parts.append("</body></html>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def _stamp(props: Any, title: str, author: str = "author") -> None:
    """An office file's core properties: its title, our author, fixed dates."""
    props.title = title
    setattr(props, author, "Kestrel Instruments")
    props.created = props.modified = CREATED.replace(tzinfo=None)


def write_docx(doc: DocText, path: Path) -> None:
    d = new_docx()
    _stamp(d.core_properties, doc.title)
    d.add_heading(doc.title, level=1)
    for s in doc.sections:
        d.add_heading(s.heading, level=2)
        for p in _paragraphs(s.sentences, doc.lang):
            d.add_paragraph(p)
    d.save(str(path))
    normalise_ooxml(path, CREATED)


def write_pptx(doc: DocText, path: Path) -> None:
    prs = new_pptx()
    _stamp(prs.core_properties, doc.title)
    layout = prs.slide_layouts[5]  # title only
    for s in doc.sections:
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = s.heading
        box = slide.shapes.add_textbox(Inches(0.5), Inches(1.5), Inches(9), Inches(5.5))
        frame = box.text_frame
        frame.word_wrap = True
        for i, line in enumerate(s.sentences):
            para = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
            para.text = line
            para.font.size = Pt(9)
    prs.save(str(path))
    normalise_ooxml(path, CREATED)


HEADER_EN = ["Record", "Owner code", "Description", "Amount"]
HEADER_ZH = ["记录号", "负责人编号", "说明", "金额"]


def _rows(doc: DocText) -> list[list[object]]:
    rows: list[list[object]] = []
    for n, s in enumerate(doc.sections, 1):
        for i, line in enumerate(s.sentences, 1):
            owner = f"K{(n * 37 + i * 11) % 9973:04d}"
            rows.append([f"R{n:03d}-{i:02d}", owner, line, (n * 7919 + i * 104729) % 100000 / 100])
    return rows


def write_csv(doc: DocText, path: Path) -> None:
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(HEADER_ZH if doc.lang is Lang.ZH else HEADER_EN)
    out.writerows(_rows(doc))
    path.write_text(buf.getvalue(), encoding="utf-8")


SHEET_SECTIONS = 8  # sections per worksheet


def write_xlsx(doc: DocText, path: Path) -> None:
    wb = Workbook()
    _stamp(wb.properties, doc.title, author="creator")
    header = HEADER_ZH if doc.lang is Lang.ZH else HEADER_EN
    rows = _rows(doc)
    per_section = [len(s.sentences) for s in doc.sections]
    start = 0
    for sheet_no, first in enumerate(range(0, len(doc.sections), SHEET_SECTIONS), 1):
        ws = wb.active if sheet_no == 1 else wb.create_sheet()
        ws.title = f"Part {sheet_no}"
        count = sum(per_section[first : first + SHEET_SECTIONS])
        ws.append(header)
        for row in rows[start : start + count]:
            ws.append(row)
        start += count
    wb.save(str(path))
    normalise_ooxml(path, CREATED)


_LEFT, _RIGHT, _TOP, _BOTTOM = 64.0, A4[0] - 64.0, A4[1] - 64.0, 60.0


def _wrap(text: str, font: str, size: float, width: float) -> list[str]:
    """Lines of at most `width` points: at spaces for Latin text, anywhere for Chinese."""
    if font != _CJK_FONT:
        return list(simpleSplit(text, font, size, width))
    lines, line, used = [], "", 0.0
    for ch in text:
        w = pdfmetrics.stringWidth(ch, font, size)
        if used + w > width and line:
            lines.append(line)
            line, used = "", 0.0
        line += ch
        used += w
    return [*lines, line] if line else lines


def write_pdf(doc: DocText, path: Path) -> None:
    """Text flowed down the page; a new page every two sections or when one is full."""
    font = "Helvetica" if doc.lang is Lang.EN else _CJK_FONT
    c = canvas.Canvas(str(path), pagesize=A4, invariant=1, pageCompression=1)
    c.setTitle(doc.title)
    c.setAuthor("Kestrel Instruments")
    stamp = CREATED.strftime("D:%Y%m%d%H%M%S+00'00'")
    c.setDateFormatter(lambda *_: stamp)
    y = _TOP
    for n, s in enumerate(doc.sections):
        if n and n % 2 == 0:
            c.showPage()
            y = _TOP
        blocks = [(s.heading, 13.0)] + [(p, 10.0) for p in _paragraphs(s.sentences, doc.lang)]
        for text, size in blocks:
            for line in _wrap(text, font, size, _RIGHT - _LEFT):
                if y < _BOTTOM:
                    c.showPage()
                    y = _TOP
                c.setFont(font, size)
                c.drawString(_LEFT, y, line)
                y -= size * 1.4
            y -= 6
    c.showPage()
    c.save()


WRITERS: dict[str, Callable[[DocText, Path], None]] = {
    "docx": write_docx,
    "pdf": write_pdf,
    "xlsx": write_xlsx,
    "pptx": write_pptx,
    "md": write_md,
    "txt": write_txt,
    "csv": write_csv,
    "html": write_html,
}
