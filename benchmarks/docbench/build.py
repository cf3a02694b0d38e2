"""The document benchmark's knowledge base: office files of one fictional company.

Kestrel Instruments (凯斯特仪器), a sensor maker in Suzhou, keeps English and Chinese
documents side by side: policies, contracts, specs, a price list, an inventory export,
meeting decks and minutes, FAQs. Several documents look alike on purpose (two supply-type
contracts, two spec sheets, a travel policy and a reimbursement guide, a price list and an
inventory with the same product codes), so a search has plausible wrong answers to pick.

Everything is generated from the content below; dates inside the files, zip entry times
and file times are fixed, so two builds give the same bytes. The facts the queries in
`queries.jsonl` ask for sit at known pages, sections, slides and rows
(`tests/test_eval.py` checks every one of them against the ingested text).

    python benchmarks/docbench/build.py DEST
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the writers beside this file
from docx_files import (
    DocxDoc,
    cloud_sla,
    incident_zh,
    leave_policy_zh,
    logistics_agreement,
    render_docx,
    supply_agreement,
)
from kbcommon import utc
from pdf_files import (
    PdfDoc,
    incident_firmware,
    incident_wuxi,
    render_pdf,
    security_policy,
    travel_policy,
)
from sheet_files import PRICE_ROWS, write_inventory, write_price_list
from slide_files import launch_deck, sales_review
from text_files import (
    BOARD_MINUTES_GBK_TXT,
    ENGINEERING_SYNC_TXT,
    FAQ_HTML,
    REIMBURSEMENT_MD,
    REMOTE_WORK_MD,
    VPN_HTML,
    XR5000_SPEC_MD,
    XR7000_SPEC_MD,
)

__all__ = ["FILES", "KB_DIRNAME", "PRICE_ROWS", "build"]

KB_DIRNAME = "kestrel-kb"


def _text(content: str, encoding: str = "utf-8") -> Callable[[Path], None]:
    return lambda path: path.write_bytes(content.encode(encoding))


def _pdf(make: Callable[[], PdfDoc]) -> Callable[[Path], None]:
    return lambda path: render_pdf(make(), path)


def _docx(make: Callable[[], DocxDoc]) -> Callable[[Path], None]:
    return lambda path: render_docx(make(), path)


# path -> (writer, file mtime); the build order
FILES: dict[str, tuple[Callable[[Path], None], datetime]] = {
    "policies/Travel_and_Expense_Policy_2025.pdf": (_pdf(travel_policy), utc(2025, 1, 6)),
    "policies/Information_Security_Policy_v3.pdf": (_pdf(security_policy), utc(2024, 11, 18)),
    "contracts/Supply_Agreement_Northstar_Metals.docx": (
        _docx(supply_agreement),
        utc(2025, 2, 14),
    ),
    "contracts/Logistics_Services_Agreement_SwiftCargo.docx": (
        _docx(logistics_agreement),
        utc(2024, 6, 3),
    ),
    "contracts/云服务水平协议_SLA.docx": (_docx(cloud_sla), utc(2024, 12, 20)),
    "hr/员工休假管理制度.docx": (_docx(leave_policy_zh), utc(2025, 1, 2)),
    "hr/Remote_Work_Guidelines.md": (_text(REMOTE_WORK_MD), utc(2025, 2, 20)),
    "finance/费用报销流程说明.md": (_text(REIMBURSEMENT_MD), utc(2025, 2, 10)),
    "sales/Price_List_2025.xlsx": (write_price_list, utc(2025, 1, 15)),
    "sales/Q2_2025_Sales_Review.pptx": (sales_review, utc(2025, 7, 7)),
    "ops/Warehouse_Inventory_2025-06.csv": (write_inventory, utc(2025, 6, 30)),
    "product/HT-900_新品发布_Launch.pptx": (launch_deck, utc(2025, 6, 10)),
    "product/XR-7000_Pressure_Transmitter_Spec.md": (_text(XR7000_SPEC_MD), utc(2025, 3, 3)),
    "product/XR-5000_Pressure_Transmitter_Spec.md": (_text(XR5000_SPEC_MD), utc(2023, 8, 1)),
    "support/客户常见问题_FAQ.html": (_text(FAQ_HTML), utc(2025, 4, 1)),
    "it/VPN_and_Remote_Access.html": (_text(VPN_HTML), utc(2024, 9, 9)),
    "meetings/2025-03-12_Engineering_Sync.txt": (_text(ENGINEERING_SYNC_TXT), utc(2025, 3, 12)),
    "meetings/2025年4月管理层会议纪要.txt": (
        _text(BOARD_MINUTES_GBK_TXT, "gbk"),
        utc(2025, 4, 23),
    ),
    "quality/Incident_Report_IR-2025-031.pdf": (_pdf(incident_wuxi), utc(2025, 5, 20)),
    "quality/Incident_Report_IR-2025-017.pdf": (_pdf(incident_firmware), utc(2025, 3, 20)),
    "quality/质量事故报告_QA-2025-06.docx": (_docx(incident_zh), utc(2025, 6, 30)),
}


def build(dest: Path) -> Path:
    """Write the knowledge base under `dest/kestrel-kb` and return that folder."""
    root = Path(dest).resolve() / KB_DIRNAME
    for rel, (write, mtime) in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
        os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return root


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python benchmarks/docbench/build.py DEST", file=sys.stderr)
        return 2
    root = build(Path(args[0]))
    print(f"{len(FILES)} files under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
