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

import csv
import io
import os
import random
import re
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docx import Document as new_docx
from docx.oxml.ns import qn
from openpyxl import Workbook
from pptx import Presentation as new_pptx
from pptx.util import Inches
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import simpleSplit
from reportlab.pdfgen import canvas

KB_DIRNAME = "kestrel-kb"
_ZIP_TIME = (2025, 1, 1, 0, 0, 0)


def _utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 9, 0, 0, tzinfo=UTC)


def _squash(text: str) -> str:
    """One paragraph from an indented triple-quoted literal."""
    return " ".join(text.split())


def _zh(text: str) -> str:
    """A Chinese paragraph: line breaks in the source are not word boundaries."""
    return re.sub(r"\n\s*", "", text).strip()


# ------------------------------------------------------------------------------------------
# zip normalisation: OOXML writers stamp the current time into entries and core.xml
# ------------------------------------------------------------------------------------------

_CORE_DATE = re.compile(
    rb"(<dcterms:(created|modified)\b[^>]*>)[^<]*(</dcterms:(?:created|modified)>)"
)


def _normalise_ooxml(path: Path, when: datetime) -> None:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as src:
        entries = [(info.filename, src.read(info)) for info in src.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, content in entries:
            if name == "docProps/core.xml":
                content = _CORE_DATE.sub(lambda m: m.group(1) + stamp + m.group(3), content)
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            dst.writestr(info, content)
    path.write_bytes(buf.getvalue())


# ------------------------------------------------------------------------------------------
# PDF: (style, text) blocks placed by hand, so page numbers are exact; bookmarks per page
# ------------------------------------------------------------------------------------------

Block = tuple[str, str]  # style: title | h1 | p | bullet | row ("label|value")


@dataclass(frozen=True)
class PdfPage:
    blocks: tuple[Block, ...]
    bookmarks: tuple[str, ...] = ()


@dataclass(frozen=True)
class PdfDoc:
    title: str
    author: str
    created: datetime
    footer: str
    pages: tuple[PdfPage, ...]


_PDF_STYLES: dict[str, tuple[str, float, float, float]] = {
    "title": ("Helvetica-Bold", 19, 25, 10),
    "h1": ("Helvetica-Bold", 14, 19, 6),
    "p": ("Helvetica", 10.5, 14, 8),
    "bullet": ("Helvetica", 10.5, 14, 3),
    "row": ("Helvetica", 10.5, 15, 0),
}
_LEFT, _RIGHT, _TOP, _BOTTOM = 64.0, A4[0] - 64.0, A4[1] - 64.0, 60.0


def _render_pdf(doc: PdfDoc, path: Path) -> None:
    c = canvas.Canvas(str(path), pagesize=A4, invariant=1, pageCompression=1)
    c.setTitle(doc.title)
    c.setAuthor(doc.author)
    c.setCreator("pgrag docbench")
    stamp = doc.created.strftime("D:%Y%m%d%H%M%S+00'00'")
    c.setDateFormatter(lambda *_: stamp)
    for n, page in enumerate(doc.pages, 1):
        for i, title in enumerate(page.bookmarks):
            key = f"p{n}-{i}"
            c.bookmarkPage(key)
            c.addOutlineEntry(title, key, level=0, closed=False)
        y = _TOP
        for style, text in page.blocks:
            font, size, leading, after = _PDF_STYLES[style]
            c.setFont(font, size)
            if style == "row":
                label, value = text.split("|")
                y -= leading
                c.drawString(_LEFT + 12, y, label)
                c.drawRightString(_RIGHT, y, value)
            else:
                indent = 14.0 if style == "bullet" else 0.0
                for i, line in enumerate(simpleSplit(text, font, size, _RIGHT - _LEFT - indent)):
                    y -= leading
                    if style == "bullet" and i == 0:
                        c.drawString(_LEFT, y, "-")
                    c.drawString(_LEFT + indent, y, line)
            y -= after
            if y < _BOTTOM:
                raise ValueError(f"{path.name}: page {n} overflows")
        c.setFont("Helvetica", 8)
        c.drawString(_LEFT, 36, doc.footer)
        c.drawRightString(_RIGHT, 36, f"Page {n} of {len(doc.pages)}")
        c.showPage()
    c.showOutline()
    c.save()


def _travel_policy() -> PdfDoc:
    p = lambda t: ("p", _squash(t))  # noqa: E731
    return PdfDoc(
        title="Travel and Expense Policy 2025",
        author="Kestrel Instruments Finance",
        created=_utc(2025, 1, 6),
        footer="Kestrel Instruments - Travel and Expense Policy 2025 - Internal",
        pages=(
            PdfPage(
                (
                    ("title", "Travel and Expense Policy 2025"),
                    p("""Owner: Finance Department. Effective 1 February 2025. This policy
                    replaces the 2022 travel guideline and applies to all employees of Kestrel
                    Instruments and its subsidiaries travelling on company business."""),
                    ("h1", "1. Purpose and Scope"),
                    p("""The company pays for reasonable business travel. Travellers are
                    expected to choose the most economical option that still meets the purpose
                    of the trip. Costs that are personal, such as family members travelling
                    along, upgrades paid with points or minibar charges, remain the traveller's
                    own."""),
                    ("h1", "2. Approval Before Travel"),
                    p("""Every trip must be approved in the travel system before anything is
                    booked. Domestic trips are approved by the line manager. Trips outside
                    mainland China need the approval of a vice president, and trips longer than
                    fourteen days also need the approval of the CFO."""),
                    p("""Bookings are made through the company travel agency, CTrip Business,
                    so that the company can locate travellers in an emergency."""),
                ),
                ("1. Purpose and Scope", "2. Approval Before Travel"),
            ),
            PdfPage(
                (
                    ("h1", "3. Air Travel"),
                    p("""Economy class is the standard for all flights. Premium economy may be
                    booked for flights with a scheduled duration of more than 6 hours. Business
                    class is allowed only for flights longer than 10 hours and requires written
                    CFO approval before booking."""),
                    p("""Tickets should be booked at least 14 days before departure where
                    possible. Change fees caused by business reasons are reimbursed; change
                    fees caused by personal plans are not."""),
                    ("h1", "3.1 Rail Travel"),
                    p("""For trips under five hours within China, high-speed rail is preferred
                    to flying. Second class is the standard; first class is allowed for
                    journeys longer than three hours."""),
                ),
                ("3. Air Travel",),
            ),
            PdfPage(
                (
                    ("h1", "4. Hotels"),
                    p("""Hotels are booked through the travel agency at or below the nightly
                    cap for the city. The cap includes taxes and breakfast. If no room is
                    available under the cap, the traveller's manager may approve up to 20 %
                    more in writing."""),
                    ("row", "City|Nightly cap"),
                    ("row", "Shanghai|950 CNY"),
                    ("row", "Beijing|900 CNY"),
                    ("row", "Shenzhen|850 CNY"),
                    ("row", "Suzhou|600 CNY"),
                    ("row", "Singapore|320 SGD"),
                    ("row", "Frankfurt|210 EUR"),
                    ("row", "Other cities in China|550 CNY"),
                    p("""Staying with friends or family instead of a hotel is welcome; a
                    private accommodation allowance is not paid."""),
                ),
                ("4. Hotels",),
            ),
            PdfPage(
                (
                    ("h1", "5. Meals and Per Diem"),
                    p("""The daily meal allowance is 180 CNY in mainland China and 65 USD
                    abroad. It covers breakfast only when the hotel rate does not include it.
                    Meals provided by a conference or a customer are deducted."""),
                    p("""Alcohol is not reimbursed, except at client dinners approved in
                    advance by a department head."""),
                    ("h1", "6. Ground Transport"),
                    p("""Taxis and ride-hailing services are reimbursed for business journeys.
                    Rental cars need prior approval and the cheapest suitable category. Private
                    cars are reimbursed at 1.2 CNY per kilometre."""),
                ),
                ("5. Meals and Per Diem", "6. Ground Transport"),
            ),
            PdfPage(
                (
                    ("h1", "7. Submitting Claims"),
                    p("""Expense claims must be submitted within 30 days after returning from
                    the trip. Receipts are required for every item above 100 CNY. Claims
                    submitted more than 90 days after the trip are rejected."""),
                    p("""Questions about this policy go to expenses@kestrel-instruments.com.
                    How claims are approved and paid is described in the reimbursement guide
                    of the finance department."""),
                    ("h1", "8. Exceptions"),
                    p("""Exceptions to this policy need the written approval of the CFO and are
                    reviewed by internal audit every quarter."""),
                ),
                ("7. Submitting Claims", "8. Exceptions"),
            ),
        ),
    )


def _security_policy() -> PdfDoc:
    p = lambda t: ("p", _squash(t))  # noqa: E731
    return PdfDoc(
        title="Information Security Policy v3",
        author="Kestrel Instruments IT Security",
        created=_utc(2024, 11, 18),
        footer="Kestrel Instruments - Information Security Policy v3 - Internal",
        pages=(
            PdfPage(
                (
                    ("title", "Information Security Policy v3"),
                    p("""Approved by the management board on 18 November 2024. Applies to all
                    employees, contractors and systems of Kestrel Instruments."""),
                    ("h1", "1. Scope"),
                    p("""This policy covers company information in any form: files, e-mail,
                    source code, production data, printed documents and conversations."""),
                    ("h1", "2. Classification"),
                    p("""Information is classified as Public, Internal, Confidential or
                    Restricted. Customer drawings, prices and contracts are Confidential.
                    Source code of device firmware and cryptographic keys are Restricted and
                    may only be stored on approved systems."""),
                ),
                ("1. Scope", "2. Classification"),
            ),
            PdfPage(
                (
                    ("h1", "3. Passwords and Access"),
                    p("""Passwords must be at least 14 characters long and must not be reused
                    across systems. A password manager approved by IT is provided to every
                    employee. Multi-factor authentication is required for e-mail, VPN and all
                    systems reachable from the internet."""),
                    p("""An account is locked after 5 failed login attempts. Access rights are
                    reviewed by each department head every six months, and the accounts of
                    people leaving the company are disabled on their last working day."""),
                ),
                ("3. Passwords and Access",),
            ),
            PdfPage(
                (
                    ("h1", "4. Devices"),
                    p("""Company laptops use full-disk encryption (BitLocker or FileVault) and
                    receive security updates within 14 days of release. USB storage devices
                    are blocked by default; exceptions are granted by IT Security."""),
                    p("""A lost or stolen device must be reported to IT Security within 2
                    hours, by calling the service desk or writing to
                    security@kestrel-instruments.com, so that it can be wiped remotely."""),
                ),
                ("4. Devices",),
            ),
            PdfPage(
                (
                    ("h1", "5. Incidents"),
                    p("""Security incidents, such as phishing that was answered, malware or a
                    suspected data leak, must be reported to the Security Operations Center
                    within 4 hours of being noticed. The SOC decides whether customers or
                    authorities have to be informed."""),
                    ("h1", "6. Retention and Backups"),
                    p("""Customer data is retained for seven years after the end of the
                    contract and then deleted. Backups of production systems are encrypted,
                    kept in two locations and restored in a test once every quarter."""),
                ),
                ("5. Incidents", "6. Retention and Backups"),
            ),
        ),
    )


# ------------------------------------------------------------------------------------------
# DOCX: headings, paragraphs, page breaks
# ------------------------------------------------------------------------------------------

DocxBlock = tuple[str, str]  # style: title | h1 | h2 | p | bullet | break


@dataclass(frozen=True)
class DocxDoc:
    title: str
    author: str
    created: datetime
    blocks: tuple[DocxBlock, ...]
    language: str = "en-US"


def _render_docx(spec: DocxDoc, path: Path) -> None:
    doc = new_docx()
    props = doc.core_properties
    props.title, props.author, props.last_modified_by = spec.title, spec.author, spec.author
    props.revision, props.language = 1, spec.language
    props.created = props.modified = spec.created.replace(tzinfo=None)
    if spec.language.startswith("zh"):
        rfonts = doc.styles["Normal"].element.get_or_add_rPr().get_or_add_rFonts()
        rfonts.set(qn("w:eastAsia"), "SimSun")
    for style, text in spec.blocks:
        if style == "title":
            doc.add_heading(text, level=0)
        elif style in ("h1", "h2"):
            doc.add_heading(text, level=int(style[1]))
        elif style == "bullet":
            doc.add_paragraph(text, style="List Bullet")
        elif style == "break":
            doc.add_page_break()
        else:
            doc.add_paragraph(text)
    doc.save(str(path))
    _normalise_ooxml(path, spec.created)


_BREAK: DocxBlock = ("break", "")


def _supply_agreement() -> DocxDoc:
    p = lambda t: ("p", _squash(t))  # noqa: E731
    return DocxDoc(
        title="Supply Agreement - Northstar Metals",
        author="Kestrel Instruments Legal",
        created=_utc(2025, 2, 14),
        blocks=(
            ("title", "Supply Agreement"),
            p("""Contract No. KI-SA-2025-0147. This Supply Agreement is entered into on 14
            February 2025 between Kestrel Instruments Co., Ltd., Suzhou ("Buyer") and Northstar
            Metals Pte. Ltd., Singapore ("Supplier")."""),
            ("h1", "1. Parties and Definitions"),
            p(""""Products" means the stainless steel diaphragms and sensor housings listed in
            Annex A. "Order" means a purchase order issued by the Buyer under this
            Agreement."""),
            ("h1", "2. Orders and Delivery"),
            p("""The Supplier shall deliver within six weeks of accepting an Order. Delivery is
            FCA Suzhou (Incoterms 2020). Partial deliveries need the Buyer's consent."""),
            _BREAK,
            ("h1", "3. Prices and Payment"),
            p("""Prices are stated in US dollars and remain fixed until 31 December 2025.
            The Buyer shall pay each correct invoice within 45 days of receipt. Late payments
            bear interest at 4 % per year above the SORA rate."""),
            ("h1", "4. Quality and Warranty"),
            p("""The Supplier warrants that the Products are free from defects for 24 months
            from delivery. If the share of defective parts in any quarter exceeds 0.3 %, the
            Supplier shall submit a corrective action plan within ten working days."""),
            _BREAK,
            ("h1", "5. Liability and Liquidated Damages"),
            p("""If the Supplier delivers late for reasons within its control, it shall pay
            liquidated damages of 0.5 % of the value of the delayed Order for each full week of
            delay, capped at 10 % of that value. The total liability of either party is
            limited to the value of the Orders of the preceding twelve months."""),
            ("h1", "6. Term and Termination"),
            p("""This Agreement runs for three years from signature and renews by one year at
            a time. Either party may terminate it with 90 days' written notice."""),
            ("h1", "7. Governing Law"),
            p("""This Agreement is governed by the laws of Singapore. Disputes are settled by
            arbitration at the Singapore International Arbitration Centre (SIAC)."""),
        ),
    )


def _logistics_agreement() -> DocxDoc:
    p = lambda t: ("p", _squash(t))  # noqa: E731
    return DocxDoc(
        title="Logistics Services Agreement - SwiftCargo",
        author="Kestrel Instruments Legal",
        created=_utc(2024, 6, 3),
        blocks=(
            ("title", "Logistics Services Agreement"),
            p("""Contract No. KI-LS-2024-0088, between Kestrel Instruments Co., Ltd. ("Customer")
            and SwiftCargo Logistics (Shanghai) Co., Ltd. ("Provider"), dated 3 June 2024."""),
            ("h1", "1. Services"),
            p("""The Provider collects finished goods from the Customer's Suzhou plant, stores
            them in its Waigaoqiao bonded warehouse and ships them to customers in Asia and
            Europe."""),
            ("h1", "2. Service Levels"),
            p("""Shipments booked before 15:00 are picked up the same day. The Provider
            achieves an on-time delivery rate of at least 97 % per month; below that, the
            monthly service fee is reduced by 5 %."""),
            _BREAK,
            ("h1", "3. Fees and Payment"),
            p("""Fees follow the rate card in Annex 2 and are invoiced monthly in CNY. The
            Customer pays within 30 days of the invoice date."""),
            ("h1", "4. Liability"),
            p("""The Provider is liable for loss of or damage to goods in its custody up to
            the invoice value of the goods. Cargo insurance is arranged by the Provider at
            110 % of invoice value."""),
            _BREAK,
            ("h1", "5. Term and Termination"),
            p("""The Agreement runs for two years. Either party may terminate it with 60 days'
            written notice, or immediately if the other party materially breaches it."""),
            ("h1", "6. Governing Law"),
            p("""This Agreement is governed by the laws of the People's Republic of China.
            Disputes are submitted to the Shanghai International Arbitration Center."""),
        ),
    )


def _cloud_sla() -> DocxDoc:
    p = lambda t: ("p", _zh(t))  # noqa: E731
    return DocxDoc(
        title="云服务水平协议",
        author="凯斯特仪器 信息技术部",
        created=_utc(2024, 12, 20),
        language="zh-CN",
        blocks=(
            ("title", "云服务水平协议（SLA）"),
            p("""合同编号：KI-IT-2025-0032。甲方：凯斯特仪器有限公司；乙方：云启科技（上海）有限公司。
            本协议约定乙方为甲方的 ERP 与 MES 系统提供云主机、数据库及备份服务的服务水平。"""),
            ("h1", "一、服务范围"),
            p("""乙方提供的服务包括：云主机、托管数据库、对象存储、每日备份以及 7×24 小时技术支持。
            甲方自行负责应用系统的配置与账号管理。"""),
            ("h1", "二、服务可用性"),
            p("""乙方承诺每月服务可用性不低于 99.95%。计划内维护须提前 72 小时书面通知甲方，
            且不得安排在工作日 8:00 至 20:00 之间，计划内维护时间不计入不可用时间。"""),
            _BREAK,
            ("h1", "三、故障等级与响应时间"),
            p("""P1 故障（核心系统全部不可用）：乙方须在 15 分钟内响应，4 小时内恢复服务。
            P2 故障（部分功能不可用）：1 小时内响应，8 小时内恢复。P3 故障（咨询及一般问题）：
            1 个工作日内答复。"""),
            ("h1", "四、服务积分"),
            p("""当月可用性低于 99.95% 但不低于 99.5% 时，乙方按当月服务费的 10% 向甲方返还服务积分；
            低于 99.5% 时返还 30%。服务积分可抵扣下月服务费，不兑换现金。"""),
            _BREAK,
            ("h1", "五、数据备份"),
            p("""乙方每日进行增量备份，每周进行一次全量备份，备份数据保留 35 天，并存放于
            与生产环境不同的可用区。甲方可每季度申请一次恢复演练。"""),
            ("h1", "六、协议期限"),
            p("""本协议自 2025 年 1 月 1 日起生效，有效期两年。期满前 60 天双方均未书面提出异议的，
            自动续期一年。"""),
        ),
    )


def _leave_policy_zh() -> DocxDoc:
    p = lambda t: ("p", _zh(t))  # noqa: E731
    return DocxDoc(
        title="员工休假管理制度",
        author="凯斯特仪器 人力资源部",
        created=_utc(2025, 1, 2),
        language="zh-CN",
        blocks=(
            ("title", "员工休假管理制度"),
            p(
                """本制度经公司总经理办公会审议通过，自 2025 年 1 月 1 日起施行，适用于公司全体正式员工。"""
            ),
            ("h1", "第一章 总则"),
            p("""为保障员工休息休假的权利，规范请假审批流程，根据国家有关法律法规，结合公司实际，
            制定本制度。"""),
            ("h1", "第二章 年休假"),
            p("""员工累计工作已满 1 年不满 10 年的，年休假 5 天；已满 10 年不满 20 年的，年休假
            10 天；已满 20 年的，年休假 15 天。在此基础上，公司每年额外给予 3 天带薪福利假。
            年休假原则上应在当年休完，确因工作需要未休的，可顺延至次年 3 月 31 日。"""),
            _BREAK,
            ("h1", "第三章 病假"),
            p("""员工因病需要休息的，应提供二级以上医院出具的病假证明。病假期间工资按本人基本工资的
            80% 发放，且不低于当地最低工资标准的 80%。"""),
            ("h1", "第四章 婚假、产假与陪产假"),
            p("""员工依法办理结婚登记的，享受婚假 3 天，公司另给予奖励婚假 7 天，合计 10 天，
            须在登记之日起一年内休完。女员工生育享受产假 158 天；男员工在配偶生育期间享受陪产假
            15 天。"""),
            _BREAK,
            ("h1", "第五章 请假审批"),
            p("""请假 3 天以内（含 3 天）由部门经理审批；3 天以上的由分管副总经理审批。
            员工应至少提前 5 个工作日在 OA 系统提交请假申请，病假等紧急情况可事后 2 个工作日内补办。"""),
        ),
    )


# ------------------------------------------------------------------------------------------
# Incident reports: only the first page or the lead names the site, the date and the
# customer; the pages that answer (root cause, actions, costs) never repeat them
# ------------------------------------------------------------------------------------------

_QUALITY_FOOTER = "Kestrel Instruments - Quality Management - Internal"


def _incident_wuxi() -> PdfDoc:
    p = lambda t: ("p", _squash(t))  # noqa: E731
    return PdfDoc(
        title="Incident Report IR-2025-031",
        author="Kestrel Instruments Quality Management",
        created=_utc(2025, 5, 20),
        footer=_QUALITY_FOOTER,
        pages=(
            PdfPage(
                (
                    ("title", "Incident Report IR-2025-031"),
                    ("h1", "1. Summary"),
                    p("""On 14 May 2025 the Wuxi plant lost power to its calibration line for
                    nine hours. The customer Huaneng Power received 38 transmitters late, and
                    212 machines at the customer's sites waited for their replacement units.
                    Report owner: Quality Management, Gao Yan."""),
                    ("h1", "2. Impact"),
                    p("""Production of 640 transmitters was delayed by two days. No product left
                    the plant uncalibrated."""),
                ),
                ("1. Summary", "2. Impact"),
            ),
            PdfPage(
                (
                    ("h1", "3. Timeline"),
                    p("""06:10 alarms on the line controller. 06:25 the feeder breaker is found
                    tripped. 07:30 the electrical contractor arrives. 11:40 the damaged part is
                    identified. 15:20 the line is restarted after the spare busbar arrived from
                    the central store."""),
                ),
                ("3. Timeline",),
            ),
            PdfPage(
                (
                    ("h1", "4. Root Cause"),
                    p("""The power failure was caused by a cracked busbar joint in the main
                    switchboard. Years of thermal cycling loosened the bolted connection; the
                    joint overheated and the protection relay tripped the feeder. The joint had
                    never been inspected with thermography since the switchboard was installed
                    in 2016."""),
                ),
                ("4. Root Cause",),
            ),
            PdfPage(
                (
                    ("h1", "5. Corrective Actions"),
                    p("""Thermographic inspection of every switchboard twice a year; a torque
                    check of all bolted joints during the annual shutdown; a spare busbar kit
                    is kept on site. Owner: Facilities, due by 30 September."""),
                    ("h1", "6. Costs"),
                    p("""Overtime, express freight and the contractor cost 286,000 CNY; the
                    late-delivery penalty paid to the customer was 95,000 CNY."""),
                ),
                ("5. Corrective Actions", "6. Costs"),
            ),
        ),
    )


def _incident_firmware() -> PdfDoc:
    p = lambda t: ("p", _squash(t))  # noqa: E731
    return PdfDoc(
        title="Incident Report IR-2025-017",
        author="Kestrel Instruments Quality Management",
        created=_utc(2025, 3, 20),
        footer=_QUALITY_FOOTER,
        pages=(
            PdfPage(
                (
                    ("title", "Incident Report IR-2025-017"),
                    ("h1", "1. Summary"),
                    p("""On 3 March 2025 the Suzhou warehouse shipped 40 XR-7000 pressure
                    transmitters with firmware 4.0 instead of 4.2 to the customer Sinopec
                    Zhenhai. The customer found the error during commissioning."""),
                    ("h1", "2. Impact"),
                    p("""All 40 units were updated on site within three days by two service
                    engineers; commissioning was delayed by one week."""),
                ),
                ("1. Summary", "2. Impact"),
            ),
            PdfPage(
                (
                    ("h1", "3. Timeline"),
                    p("""Day 0 shipment. Day 7 complaint received by the service desk. Day 8
                    two service engineers on site. Day 10 every unit updated and tested."""),
                ),
                ("3. Timeline",),
            ),
            PdfPage(
                (
                    ("h1", "4. Root Cause"),
                    p("""The firmware image on the packing station was outdated. The release
                    process updated the production test benches but not the packing station,
                    which flashes the final image just before the devices are boxed."""),
                ),
                ("4. Root Cause",),
            ),
            PdfPage(
                (
                    ("h1", "5. Corrective Actions"),
                    p("""The packing station now downloads the image from the release server
                    before every shift and refuses to flash an image older than the released
                    one. The release checklist names every station that holds firmware."""),
                    ("h1", "6. Costs"),
                    p("""Travel and service time cost 48,000 CNY."""),
                ),
                ("5. Corrective Actions", "6. Costs"),
            ),
        ),
    )


def _incident_zh() -> DocxDoc:
    p = lambda t: ("p", _zh(t))  # noqa: E731
    return DocxDoc(
        title="质量事故报告",
        author="凯斯特仪器 质量部",
        created=_utc(2025, 6, 30),
        language="zh-CN",
        blocks=(
            ("title", "质量事故报告"),
            p("""编号 QA-2025-06。2025 年 6 月 9 日，深圳工厂生产的 HT-900 温湿度变送器（批次 2506A）
            在客户美的集团的洁净车间出现湿度读数漂移，涉及 1,200 台。"""),
            _BREAK,
            ("h1", "一、事故经过"),
            p(
                """客户投诉读数偏高 5%RH 以上；质量部次日派工程师到现场，抽检 50 台，其中 41 台超差。"""
            ),
            _BREAK,
            ("h1", "二、原因分析"),
            p("""湿敏元件在贴片后未按工艺要求烘烤，元件吸潮导致零点漂移。来料检验只检查外观，
            未能发现该问题。"""),
            _BREAK,
            ("h1", "三、纠正措施"),
            p("""所有湿敏元件贴片后须在 125 °C 下烘烤 4 小时；来料检验增加湿度标定抽检；
            受影响的产品全部召回并免费更换。"""),
            ("h1", "四、损失"),
            p("""召回、更换与运费合计 86 万元。"""),
        ),
    )


# ------------------------------------------------------------------------------------------
# XLSX: a 3,000-row price list and a small discount sheet
# ------------------------------------------------------------------------------------------

PRICE_HEADER = (
    "Product Code",
    "Product Name",
    "中文名称",
    "Series",
    "Unit",
    "List Price (USD)",
    "MOQ",
    "Lead Time (weeks)",
)
PRICE_ROWS = 3000  # data rows below the header

_SERIES: dict[str, tuple[tuple[str, str], ...]] = {
    "XR": (
        ("Pressure Transmitter", "压力变送器"),
        ("Differential Pressure Transmitter", "差压变送器"),
    ),
    "HT": (("Temperature Transmitter", "温度变送器"), ("Humidity Transmitter", "湿度变送器")),
    "PM": (("Vortex Flow Meter", "涡街流量计"), ("Turbine Flow Meter", "涡轮流量计")),
    "LK": (("Ultrasonic Level Sensor", "超声波物位计"), ("Float Level Switch", "浮球液位开关")),
    "QS": (("Gas Detector", "气体探测器"), ("Oxygen Analyzer", "氧分析仪")),
    "VC": (("Valve Positioner", "阀门定位器"), ("Signal Isolator", "信号隔离器")),
}
_VARIANTS = (
    ("panel mount", "盘装"),
    ("DIN rail", "导轨安装"),
    ("flameproof", "隔爆型"),
    ("stainless housing", "不锈钢外壳"),
    ("with display", "带显示"),
    ("RS-485", "RS-485 输出"),
    ("4-20 mA", "4-20 mA 输出"),
)

# rows planted with facts the queries ask for; their row numbers follow from the sort
PLANTED_PRICE_ROWS: tuple[tuple[Any, ...], ...] = (
    (
        "XR-7741",
        "Pressure Transmitter 0-40 bar, G1/2, 4-20 mA HART",
        "压力变送器 0-40 bar",
        "XR",
        "pcs",
        1286,
        10,
        6,
    ),
    (
        "XR-7710",
        "Pressure Transmitter 0-10 bar, G1/2, 4-20 mA HART",
        "压力变送器 0-10 bar",
        "XR",
        "pcs",
        1198,
        10,
        6,
    ),
    (
        "XR-7725",
        "Pressure Transmitter 0-25 bar, G1/2, 4-20 mA HART",
        "压力变送器 0-25 bar",
        "XR",
        "pcs",
        1242,
        10,
        6,
    ),
    (
        "HT-9020",
        "Humidity Transmitter, duct mount, 2 % RH",
        "风管式温湿度变送器",
        "HT",
        "pcs",
        389,
        20,
        3,
    ),
    (
        "PM-3308",
        "Electromagnetic Flow Meter DN50, PTFE liner",
        "电磁流量计 DN50",
        "PM",
        "pcs",
        1745,
        4,
        9,
    ),
    ("LK-5512", "Radar Level Sensor 0-30 m, 80 GHz", "雷达物位计 0-30 m", "LK", "pcs", 2950, 5, 11),
)
_RESERVED = re.compile(r"^(XR-77|HT-90|PM-33|LK-55)")


def price_rows() -> list[tuple[Any, ...]]:
    """The Price List sheet's data rows, sorted by product code (planted rows included)."""
    rng = random.Random(2025)
    codes = {r[0] for r in PLANTED_PRICE_ROWS}
    rows = list(PLANTED_PRICE_ROWS)
    series = list(_SERIES)
    while len(rows) < PRICE_ROWS:
        s = series[rng.randrange(len(series))]
        code = f"{s}-{rng.randrange(1000, 10000):04d}"
        if code in codes or _RESERVED.match(code):
            continue
        codes.add(code)
        (name, zh), (variant, zh_variant) = rng.choice(_SERIES[s]), rng.choice(_VARIANTS)
        rows.append(
            (
                code,
                f"{name}, {variant}",
                f"{zh} {zh_variant}",
                s,
                "pcs",
                rng.randrange(80, 4000),
                rng.choice((1, 2, 10, 20, 50)),
                rng.choice((2, 3, 4, 6, 8)),
            )
        )
    return sorted(rows, key=lambda r: r[0])


def price_row_number(code: str) -> int:
    """The sheet row (header = row 1) holding `code` on the Price List sheet."""
    return next(i for i, r in enumerate(price_rows(), 2) if r[0] == code)


DISCOUNT_ROWS: tuple[tuple[str, ...], ...] = (
    ("Tier", "Order Quantity (units)", "Discount", "Condition"),
    ("A", "1-49", "0%", "List price"),
    ("B", "50-199", "5%", "Per order"),
    ("C", "200-499", "8%", "Per order"),
    ("D", "500 and more", "12%", "Annual framework agreement required"),
    ("Distributor", "any", "18%", "Signed distribution contract"),
)


def _write_price_list(path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = "Price List"
    ws.append(PRICE_HEADER)
    for row in price_rows():
        ws.append(row)
    discounts = wb.create_sheet("Volume Discounts")
    for row in DISCOUNT_ROWS:
        discounts.append(row)
    wb.properties.title = "Kestrel Instruments Price List 2025"
    wb.properties.creator = wb.properties.lastModifiedBy = "Kestrel Sales Operations"
    wb.save(str(path))
    _normalise_ooxml(path, _utc(2025, 1, 15))


# ------------------------------------------------------------------------------------------
# CSV: a warehouse inventory export that shares product codes with the price list
# ------------------------------------------------------------------------------------------

INVENTORY_HEADER = (
    "sku",
    "description",
    "warehouse",
    "bin",
    "on_hand",
    "reserved",
    "last_count",
)
_WAREHOUSES = ("Suzhou", "Shanghai Waigaoqiao", "Shenzhen", "Rotterdam")
PLANTED_INVENTORY: dict[int, tuple[Any, ...]] = {
    # data row index (0-based) -> row; the CSV line is index + 2
    41: (
        "XR-7741",
        "Pressure Transmitter 0-40 bar",
        "Shanghai Waigaoqiao",
        "C-02-07",
        60,
        0,
        "2025-06-27",
    ),
    155: ("XR-7741", "Pressure Transmitter 0-40 bar", "Suzhou", "A-12-03", 342, 48, "2025-06-28"),
    287: (
        "HT-9020",
        "Humidity Transmitter, duct mount",
        "Suzhou",
        "B-04-11",
        1210,
        300,
        "2025-06-28",
    ),
}
INVENTORY_ROWS = 400


def inventory_rows() -> list[tuple[Any, ...]]:
    rng = random.Random(618)
    catalogue = [r for r in price_rows() if not _RESERVED.match(r[0])]
    rows = []
    for i in range(INVENTORY_ROWS):
        if i in PLANTED_INVENTORY:
            rows.append(PLANTED_INVENTORY[i])
            continue
        item = catalogue[rng.randrange(len(catalogue))]
        rows.append(
            (
                item[0],
                item[1].split(",")[0],
                rng.choice(_WAREHOUSES),
                f"{'ABCDE'[rng.randrange(5)]}-{rng.randrange(1, 20):02d}-{rng.randrange(1, 9):02d}",
                rng.randrange(0, 900),
                rng.randrange(0, 60),
                f"2025-06-{rng.randrange(20, 29)}",
            )
        )
    return rows


def _write_inventory(path: Path) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(INVENTORY_HEADER)
    writer.writerows(inventory_rows())
    path.write_bytes(buf.getvalue().encode("utf-8"))


# ------------------------------------------------------------------------------------------
# PPTX: two decks with speaker notes
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slide:
    title: str
    lines: tuple[str, ...] = ()
    notes: str = ""
    table: tuple[tuple[str, ...], ...] = ()


def _render_pptx(title: str, author: str, created: datetime, slides: tuple[Slide, ...],
                 path: Path) -> None:  # fmt: skip
    prs = new_pptx()
    props = prs.core_properties
    props.title, props.author, props.last_modified_by = title, author, author
    props.revision = 1
    props.created = props.modified = created.replace(tzinfo=None)
    for i, s in enumerate(slides):
        if i == 0:
            slide = prs.slides.add_slide(prs.slide_layouts[0])
            slide.shapes.title.text = s.title
            slide.placeholders[1].text = "\n".join(s.lines)
        elif s.table:
            slide = prs.slides.add_slide(prs.slide_layouts[5])
            slide.shapes.title.text = s.title
            rows, cols = len(s.table), len(s.table[0])
            frame = slide.shapes.add_table(rows, cols, Inches(1), Inches(2), Inches(8), Inches(3))
            for r, values in enumerate(s.table):
                for c, value in enumerate(values):
                    frame.table.cell(r, c).text = value
        else:
            slide = prs.slides.add_slide(prs.slide_layouts[1])
            slide.shapes.title.text = s.title
            slide.placeholders[1].text = "\n".join(s.lines)
        if s.notes:
            slide.notes_slide.notes_text_frame.text = s.notes
    prs.save(str(path))
    _normalise_ooxml(path, created)


def _sales_review(path: Path) -> None:
    slides = (
        Slide("Q2 2025 Sales Review", ("Sales & Marketing", "Management meeting, 8 July 2025")),
        Slide(
            "Highlights",
            (
                "Revenue 48.6 million USD, +14 % year on year",
                "Gross margin 41.2 %",
                "Three new OEM accounts in Southeast Asia",
            ),
            notes=_squash("""Start with the revenue figure: this is our best quarter so far.
            Margin is slightly below plan because of copper and steel prices."""),
        ),
        Slide(
            "Revenue by Region",
            table=(
                ("Region", "Q2 2025 (M USD)", "YoY"),
                ("China", "27.9", "+9 %"),
                ("Southeast Asia", "9.4", "+31 %"),
                ("Europe", "8.1", "+12 %"),
                ("Other", "3.2", "+6 %"),
            ),
        ),
        Slide(
            "Key Accounts",
            ("Sinopec Zhenhai: framework renewed for three years", "Petronas: first pilot order"),
            notes="Mention that the Sinopec renewal includes the XR-7000 series only.",
        ),
        Slide(
            "Churn and Risks",
            ("Customer churn 6.8 % (Q1: 4.1 %)", "Distributor coverage in North China reduced"),
            notes=_squash("""Churn went up mainly because our Tianjin distributor, Huaxin
            Trading, exited the market in April. We expect to win back about half of that
            volume through direct sales by the end of Q4."""),
        ),
        Slide(
            "Pipeline",
            ("Weighted pipeline 61 million USD", "Tenders decided in Q3: 7"),
            notes=_squash("""The largest open item is the Jakarta water utility tender, worth
            about 3.2 million USD, to be decided in September. Li Na owns the tender; the
            technical offer is due on 15 August."""),
        ),
        Slide(
            "Next Steps",
            ("Hiring plan for Q3", "Distributor search in North China", "Price review"),
            notes=_squash("""For Q3 we plan to hire 12 field sales engineers, eight of them in
            China. The price review will be presented at the September meeting."""),
        ),
    )
    _render_pptx("Q2 2025 Sales Review", "Kestrel Sales", _utc(2025, 7, 7), slides, path)


def _launch_deck(path: Path) -> None:
    slides = (
        Slide(
            "HT-900 系列温湿度变送器 新品发布", ("Product launch plan", "产品管理部 2025 年 6 月")
        ),
        Slide(
            "市场机会 Market opportunity",
            ("暖通空调与洁净室市场年增长 11%", "Competitors: Vaisala, Rotronic, E+E"),
            notes="重点讲洁净室客户：他们对长期稳定性的要求比价格更重要。",
        ),
        Slide(
            "产品亮点 Key features",
            (
                "湿度精度 ±1.5% RH，温度精度 ±0.2 °C",
                "IP66 防护等级",
                "Modbus RTU 与 4-20 mA 双输出",
            ),
        ),
        Slide(
            "定价策略 Pricing",
            ("直销价 420 USD 起", "渠道价另行通知"),
            notes="渠道价比直销价低 18%。首批订单享受免费校准服务，以便尽快进入洁净室客户的供应商名录。",
        ),
        Slide(
            "上市时间表 Timeline",
            ("7 月：小批量试产", "8 月：EMC 与认证测试", "9 月：正式发布"),
            notes="正式发布日期定为 2025 年 9 月 16 日，在上海工博会上发布；展台由市场部负责。",
        ),
        Slide("Q&A", ("问题与讨论",)),
    )
    _render_pptx("HT-900 新品发布", "凯斯特仪器 产品管理部", _utc(2025, 6, 10), slides, path)


# ------------------------------------------------------------------------------------------
# Text formats: Markdown, HTML, TXT (UTF-8 and GBK)
# ------------------------------------------------------------------------------------------

XR7000_SPEC_MD = """\
# XR-7000 Series Pressure Transmitter - Technical Specification

Document KI-TS-7000, revision C, March 2025. Product management, Kestrel Instruments.

## Overview

The XR-7000 series measures gauge and absolute pressure of liquids, gases and steam in
process plants. It replaces the XR-6000 series and is designed for oil and gas,
chemical and water applications.

## Specifications

| Parameter | Value |
|---|---|
| Measuring range | 0-10 bar to 0-40 bar |
| Accuracy | ±0.075 % of span |
| Operating temperature | -40 °C to 85 °C |
| Ingress protection | IP67 |
| Wetted parts | 316L stainless steel |

## Electrical

Output 4-20 mA with HART 7. Supply voltage 10.5 to 42 V DC. Reverse polarity protection
and surge protection to 1 kV are built in.

## Installation

Mount the transmitter above the tapping point for gases and below it for liquids. Use a
siphon for steam above 100 °C. Tighten the G1/2 process connection to 50 Nm.

## Calibration

The XR-7000 leaves the factory with a 5-point calibration certificate. We recommend a
recalibration every 24 months, or every 12 months in custody transfer applications.

## Ordering Codes

- XR-7710: 0-10 bar, G1/2, 4-20 mA HART
- XR-7725: 0-25 bar, G1/2, 4-20 mA HART
- XR-7741: 0-40 bar, G1/2, 4-20 mA HART
"""

XR5000_SPEC_MD = """\
# XR-5000 Series Pressure Transmitter - Technical Specification

Document KI-TS-5000, revision F, August 2023. Product management, Kestrel Instruments.

## Overview

The XR-5000 series is the economical pressure transmitter for machine building, HVAC and
general industry, where the XR-7000 series would be more than needed.

## Specifications

| Parameter | Value |
|---|---|
| Measuring range | 0-1 bar to 0-16 bar |
| Accuracy | ±0.25 % of span |
| Operating temperature | -20 °C to 70 °C |
| Ingress protection | IP65 |
| Wetted parts | 304 stainless steel |

## Electrical

Output 4-20 mA or 0-10 V. Supply voltage 12 to 36 V DC. No HART communication.

## Installation

Any mounting position. Tighten the G1/4 process connection to 25 Nm.

## Calibration

A 3-point factory calibration is included. Recalibrate every 12 months.
"""

REMOTE_WORK_MD = """\
# Remote Work Guidelines

Human Resources, Kestrel Instruments. Valid from 1 March 2025.

## Eligibility

Employees whose work can be done away from the plant may work remotely once they have
completed their six-month probation period. Production, laboratory and warehouse roles are
not eligible.

## Schedule

Eligible employees may work remotely up to two days per week, agreed with their manager
one week ahead. Core hours are 10:00 to 16:00 China Standard Time; during core hours
remote employees are reachable by phone and chat.

## Equipment

The company provides a laptop and a headset. For setting up a workplace at home, every
eligible employee receives a one-time home-office allowance of 1,500 CNY, paid with the
next salary after the first remote day.

## Security

Company data is only accessed through the VPN. Printing confidential documents at home is
not allowed. Public Wi-Fi may only be used together with the VPN.

## Requesting Remote Work

Requests are made in the HR portal and approved by the line manager. HR reviews the
arrangement after three months.
"""

REIMBURSEMENT_MD = """\
# 费用报销流程说明

财务部 2025 年 2 月修订。本说明规定费用报销的提交、审批和付款流程；差旅标准见《Travel and
Expense Policy 2025》。

## 一、提交

员工在费控系统中填写报销单，上传电子发票及相关附件。纸质发票须在提交后 5 个工作日内
交至财务部，并在报销单上注明单号。

## 二、审批

报销金额在 5,000 元以下的，由部门经理审批；5,000 元（含）以上的，还需财务总监审批。
项目费用须同时经项目经理确认。

## 三、付款

审批通过后，财务部在 10 个工作日内将报销款支付到员工的工资卡。每月 25 日之后通过审批的，
顺延至下月支付。

## 四、常见问题

发票抬头须为"凯斯特仪器有限公司"，税号须完整。发票丢失的，需提供情况说明并经部门经理签字。
"""

FAQ_HTML = """\
<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<title>客户常见问题 Customer FAQ</title>
<meta name="author" content="Kestrel Technical Support">
</head>
<body>
<h1>客户常见问题 Customer FAQ</h1>
<p>本页面回答客户关于保修、退货、固件和校准的常见问题。This page answers common
questions about warranty, returns, firmware and calibration.</p>
<h2>保修政策</h2>
<p>凯斯特仪器的所有产品自发货之日起保修 18 个月。保修范围包括材料和工艺缺陷，不包括
因安装不当、超量程使用或自行拆修造成的损坏。</p>
<h2>How do I return a product (RMA)?</h2>
<p>Request an RMA number in the customer portal before sending anything back. Pack the
device in its original packaging, write the RMA number on the box and ship it to our Suzhou
service centre. Devices without an RMA number are returned unopened.</p>
<h2>固件升级 Firmware update</h2>
<p>Firmware is updated with the KestrelLink app over Bluetooth or USB. The current release
for XR-7000 devices is version 4.2; it adds diagnostics for blocked impulse lines.
升级过程中请勿断电。</p>
<h2>校准证书</h2>
<p>每台设备出厂时均附带校准证书。如需 CNAS 认可的校准证书，请在下单时注明，
另收费 60 美元。</p>
<h2>联系技术支持 Contact support</h2>
<p>技术支持热线 400-820-6618，工作日 8:30 至 17:30。Support e-mail:
support@kestrel-instruments.com.</p>
</body>
</html>
"""

VPN_HTML = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>VPN and Remote Access Guide</title>
<meta name="author" content="Kestrel IT Service Desk">
</head>
<body>
<h1>VPN and Remote Access Guide</h1>
<p>How to reach company systems from outside the office.</p>
<h2>Installing the client</h2>
<p>Install the GlobalProtect client from the Software Center on your company laptop.
Private computers cannot be used for remote access.</p>
<h2>Connecting</h2>
<p>Open GlobalProtect, enter the portal address vpn.kestrel-instruments.com and sign in with
your company account. Confirm the sign-in in the authenticator app.</p>
<h2>Troubleshooting</h2>
<p>If the client shows error 0x80070005, the machine certificate is missing: open the
Software Center and run "Repair VPN certificate", then restart the laptop. If the connection
drops every few minutes, switch from Wi-Fi to a wired network or a mobile hotspot.</p>
<h2>Getting help</h2>
<p>The IT service desk is reachable at extension 6100 from 8:00 to 18:00 on working days.</p>
</body>
</html>
"""

ENGINEERING_SYNC_TXT = """\
Engineering Sync - 12 March 2025
Participants: Wang Lei (chair), Chen Jing, Markus Weber, Priya Nair, Zhao Min
Location: Suzhou R&D, room 3.14, and online

1. XR-7000 firmware 4.2
Chen Jing reported that all open defects of release 4.2 are closed except the display
flicker at -40 °C, which will be fixed in 4.2.1.
Decision: the firmware freeze for XR-7000 release 4.2 is on 28 March. Only fixes approved
by Wang Lei go in after the freeze.

2. Test bench procurement
Markus Weber compared three offers for the new automated pressure test bench. The offer of
Druck is the most expensive but has the shortest delivery time.
Decision: order the Druck bench; budget 1.35 million CNY, delivery expected in June.

3. HT-900 EMC testing
The in-house EMC chamber is booked by the XR-7000 certification until May.
Decision: the HT-900 EMC test moves to SGS Suzhou, because the in-house chamber is booked
until May. Priya Nair books the slot for the week of 14 April.

4. Tooling for the HT-900 housing
Zhao Min reported that the second injection mould for the HT-900 housing passed the first
article inspection. The remaining issue is a visible sink mark near the cable gland, which
the mould maker will correct by polishing. Cycle time is 38 seconds, two seconds better
than planned.

5. Supplier quality
Zhao Min summarised the incoming inspection results for February. The diaphragm supplier
Northstar Metals delivered two lots with a surface finish outside the drawing tolerance;
both were sorted at the supplier's cost. The share of rejected parts was 0.21 %, below the
0.3 % threshold of the supply agreement, so no corrective action plan is requested yet.
Quality will visit the Northstar plant in Singapore in May together with purchasing.

6. Documentation
The technical writers need the final HART command list for the XR-7000 user manual by the
end of March. Markus Weber will send it together with the device description files. The
Chinese manual is translated in parallel and reviewed by the Suzhou application team.

7. Any other business
Wang Lei reminded everyone that the annual safety training for the laboratory takes place
on 2 April. Attendance is mandatory for everyone who works with pressure above 10 bar.
The next engineering sync is on 26 March at 14:00.

Action items
- Chen Jing: fix the display flicker and prepare release 4.2.1 (due 11 April)
- Markus Weber: place the order for the Druck test bench (due 20 March)
- Priya Nair: book the EMC slot at SGS Suzhou and send the test plan (due 21 March)
- Zhao Min: confirm the polished mould and the sample dates (due 28 March)
- Markus Weber: send the HART command list to the technical writers (due 31 March)

Open questions
- Should the XR-7000 display support a Chinese menu in release 4.3? Product management to
  decide after the customer survey closes in April.
- Do we keep the old XR-6000 test fixtures after the switch to the new bench? Production
  engineering will check how many XR-6000 repairs are still expected this year.
- Can the HT-900 use the same cable gland as the XR-7000? Purchasing asks the supplier for
  a quote with the larger thread; Zhao Min checks whether the housing allows it.

Minutes: Priya Nair. Distribution: engineering team, product management, quality.
"""

BOARD_MINUTES_GBK_TXT = """\
2025年4月管理层会议纪要

时间：2025年4月22日 9:30-12:00
地点：苏州总部 5楼大会议室
出席：总经理 刘建国，财务总监 孙丽，研发副总 王磊，销售副总 陈晓东，生产副总 赵强
记录：行政部 周婷

一、第一季度经营情况
财务总监孙丽汇报：第一季度营业收入 3.86 亿元，同比增长 12%；毛利率 40.5%。
应收账款周转天数为 68 天，较上季度增加 5 天，主要原因是华北地区部分客户付款延迟。

二、苏州二期工厂
生产副总赵强汇报二期厂房建设进度：主体结构已完工，洁净车间正在装修。
会议决定：苏州二期工厂于2025年10月正式投产，首年产能目标为 12 万台变送器。

三、研发投入
会议决定：2025年研发预算由 3,600 万元增加到 4,200 万元，新增部分主要用于 HT-900
系列和无线传感器平台。

四、天津办事处
鉴于天津经销商退出市场，会议决定暂停天津办事处的运营，华北客户由北京办事处统一负责，
相关人员优先内部转岗。

五、其他事项
下次管理层会议定于2025年5月20日召开。
"""


def _text(content: str, encoding: str = "utf-8") -> Callable[[Path], None]:
    return lambda path: path.write_bytes(content.encode(encoding))


def _pdf(make: Callable[[], PdfDoc]) -> Callable[[Path], None]:
    return lambda path: _render_pdf(make(), path)


def _docx(make: Callable[[], DocxDoc]) -> Callable[[Path], None]:
    return lambda path: _render_docx(make(), path)


# path -> (writer, file mtime); the build order
FILES: dict[str, tuple[Callable[[Path], None], datetime]] = {
    "policies/Travel_and_Expense_Policy_2025.pdf": (_pdf(_travel_policy), _utc(2025, 1, 6)),
    "policies/Information_Security_Policy_v3.pdf": (_pdf(_security_policy), _utc(2024, 11, 18)),
    "contracts/Supply_Agreement_Northstar_Metals.docx": (
        _docx(_supply_agreement),
        _utc(2025, 2, 14),
    ),
    "contracts/Logistics_Services_Agreement_SwiftCargo.docx": (
        _docx(_logistics_agreement),
        _utc(2024, 6, 3),
    ),
    "contracts/云服务水平协议_SLA.docx": (_docx(_cloud_sla), _utc(2024, 12, 20)),
    "hr/员工休假管理制度.docx": (_docx(_leave_policy_zh), _utc(2025, 1, 2)),
    "hr/Remote_Work_Guidelines.md": (_text(REMOTE_WORK_MD), _utc(2025, 2, 20)),
    "finance/费用报销流程说明.md": (_text(REIMBURSEMENT_MD), _utc(2025, 2, 10)),
    "sales/Price_List_2025.xlsx": (_write_price_list, _utc(2025, 1, 15)),
    "sales/Q2_2025_Sales_Review.pptx": (_sales_review, _utc(2025, 7, 7)),
    "ops/Warehouse_Inventory_2025-06.csv": (_write_inventory, _utc(2025, 6, 30)),
    "product/HT-900_新品发布_Launch.pptx": (_launch_deck, _utc(2025, 6, 10)),
    "product/XR-7000_Pressure_Transmitter_Spec.md": (_text(XR7000_SPEC_MD), _utc(2025, 3, 3)),
    "product/XR-5000_Pressure_Transmitter_Spec.md": (_text(XR5000_SPEC_MD), _utc(2023, 8, 1)),
    "support/客户常见问题_FAQ.html": (_text(FAQ_HTML), _utc(2025, 4, 1)),
    "it/VPN_and_Remote_Access.html": (_text(VPN_HTML), _utc(2024, 9, 9)),
    "meetings/2025-03-12_Engineering_Sync.txt": (_text(ENGINEERING_SYNC_TXT), _utc(2025, 3, 12)),
    "meetings/2025年4月管理层会议纪要.txt": (
        _text(BOARD_MINUTES_GBK_TXT, "gbk"),
        _utc(2025, 4, 23),
    ),
    "quality/Incident_Report_IR-2025-031.pdf": (_pdf(_incident_wuxi), _utc(2025, 5, 20)),
    "quality/Incident_Report_IR-2025-017.pdf": (_pdf(_incident_firmware), _utc(2025, 3, 20)),
    "quality/质量事故报告_QA-2025-06.docx": (_docx(_incident_zh), _utc(2025, 6, 30)),
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
