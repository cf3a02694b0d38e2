"""XML (.xml): the text content as one `text` unit, the element structure as outline.

The parser never resolves entities, loads DTDs or touches the network: an ingested file
must not be able to read other local files (XXE) or blow up memory (billion laughs).
"""

from __future__ import annotations

from lxml import etree

from .base import ParsedDocument, Source, Unit
from .limits import MAX_TEXT_BYTES

MAX_PATHS = 200


def _name(el: etree._Element) -> str:
    q = etree.QName(el)
    return f"{el.prefix}:{q.localname}" if el.prefix else q.localname


def parse(src: Source) -> ParsedDocument:
    data = src.read(MAX_TEXT_BYTES)
    if not data.strip():
        return ParsedDocument(
            file_type="xml",
            units=[Unit(kind="text", number=1, body="")],
            outline={"type": "xml", "root": None, "elements": []},
        )
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    root = etree.fromstring(data, parser)
    lines: list[str] = []
    counts: dict[str, int] = {}
    path_stack: list[str] = []
    for event, node in etree.iterwalk(root, events=("start", "end")):
        is_element = isinstance(node.tag, str)  # else an unresolved entity reference
        if event == "start":
            if not is_element:
                continue
            el_path = f"{path_stack[-1] if path_stack else ''}/{_name(node)}"
            path_stack.append(el_path)
            if len(counts) < MAX_PATHS or el_path in counts:
                counts[el_path] = counts.get(el_path, 0) + 1
            text = node.text
        else:
            if is_element:
                path_stack.pop()
            text = node.tail
        if text and text.strip():
            lines.append(text.strip())
    title = None
    first = root.find("{*}title")
    if first is not None and first.text:
        title = first.text.strip() or None
    return ParsedDocument(
        file_type="xml",
        units=[Unit(kind="text", number=1, body="\n".join(lines))],
        title=title,
        outline={
            "type": "xml",
            "root": _name(root),
            "elements": [{"path": p, "count": n} for p, n in counts.items()],
        },
    )
