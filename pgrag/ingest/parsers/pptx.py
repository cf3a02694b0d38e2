"""PowerPoint (.pptx): one `slide` unit per slide, speaker notes included.

The body is title, then the other text (text frames, table cells, grouped shapes, in
shape order), then "Notes: ..." so a search hit in the notes still points at its slide;
`meta` keeps the three parts apart for `get_slides`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pptx
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

from ._common import clean, to_utc
from .base import ParsedDocument, Source, Unit
from .limits import MAX_PAGES, too_large

# placeholders repeated from the layout on every slide: noise, not content
_SKIP_PLACEHOLDERS = {PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.FOOTER}


def _shape_texts(shapes: Iterable[Any], title_id: int | None) -> Iterator[str]:
    for shape in shapes:
        if title_id is not None and shape.shape_id == title_id:
            continue
        if shape.is_placeholder and shape.placeholder_format.type in _SKIP_PLACEHOLDERS:
            continue
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shape_texts(shape.shapes, None)
        elif getattr(shape, "has_table", False) and shape.has_table:
            for row in shape.table.rows:
                cells = [" ".join(cell.text.split()) for cell in row.cells]
                if any(cells):
                    yield " | ".join(cells)
        elif shape.has_text_frame:
            text = shape.text_frame.text.strip()
            if text:
                yield text


def _slide(number: int, slide: Any) -> Unit:
    title_shape = slide.shapes.title
    title = clean(title_shape.text_frame.text) if title_shape is not None else None
    title_id = title_shape.shape_id if title_shape is not None else None
    body_text = "\n".join(_shape_texts(slide.shapes, title_id))
    notes = None
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = clean(frame.text) if frame is not None else None
    body = "\n".join(part for part in (title, body_text) if part)
    if notes:
        body += ("\n\n" if body else "") + "Notes: " + notes
    return Unit(
        kind="slide",
        number=number,
        body=body,
        title=title,
        meta={"title": title, "notes": notes, "body_text": body_text},
    )


def parse(src: Source) -> ParsedDocument:
    presentation = pptx.Presentation(src.file)
    if len(presentation.slides) > MAX_PAGES:
        raise too_large(f"{len(presentation.slides):,} slides (at most {MAX_PAGES:,})")
    units = [_slide(n, slide) for n, slide in enumerate(presentation.slides, 1)]
    props = presentation.core_properties
    return ParsedDocument(
        file_type="pptx",
        units=units,
        title=clean(props.title) or next((u.title for u in units if u.title), None),
        author=clean(props.author),
        created=to_utc(props.created),
        modified=to_utc(props.modified),
        outline={
            "type": "pptx",
            "total_slides": len(units),
            "slides": [{"number": u.number, "title": u.title} for u in units],
        },
    )
