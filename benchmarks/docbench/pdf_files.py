"""docbench's PDF files: the policies and two incident reports, placed by hand."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from kbcommon import squash, utc
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import simpleSplit
from reportlab.pdfgen import canvas

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


def render_pdf(doc: PdfDoc, path: Path) -> None:
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


def travel_policy() -> PdfDoc:
    p = lambda t: ("p", squash(t))  # noqa: E731
    return PdfDoc(
        title="Travel and Expense Policy 2025",
        author="Kestrel Instruments Finance",
        created=utc(2025, 1, 6),
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


def security_policy() -> PdfDoc:
    p = lambda t: ("p", squash(t))  # noqa: E731
    return PdfDoc(
        title="Information Security Policy v3",
        author="Kestrel Instruments IT Security",
        created=utc(2024, 11, 18),
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
# Incident reports: only the first page or the lead names the site, the date and the
# customer; the pages that answer (root cause, actions, costs) never repeat them
# ------------------------------------------------------------------------------------------

_QUALITY_FOOTER = "Kestrel Instruments - Quality Management - Internal"


def incident_wuxi() -> PdfDoc:
    p = lambda t: ("p", squash(t))  # noqa: E731
    return PdfDoc(
        title="Incident Report IR-2025-031",
        author="Kestrel Instruments Quality Management",
        created=utc(2025, 5, 20),
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


def incident_firmware() -> PdfDoc:
    p = lambda t: ("p", squash(t))  # noqa: E731
    return PdfDoc(
        title="Incident Report IR-2025-017",
        author="Kestrel Instruments Quality Management",
        created=utc(2025, 3, 20),
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
