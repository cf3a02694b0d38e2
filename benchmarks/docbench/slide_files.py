"""docbench's PPTX files: two decks with speaker notes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from kbcommon import normalise_ooxml, squash, utc
from pptx import Presentation as new_pptx
from pptx.util import Inches

# ------------------------------------------------------------------------------------------
# PPTX: two decks with speaker notes
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slide:
    title: str
    lines: tuple[str, ...] = ()
    notes: str = ""
    table: tuple[tuple[str, ...], ...] = ()


def render_pptx(title: str, author: str, created: datetime, slides: tuple[Slide, ...],
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
    normalise_ooxml(path, created)


def sales_review(path: Path) -> None:
    slides = (
        Slide("Q2 2025 Sales Review", ("Sales & Marketing", "Management meeting, 8 July 2025")),
        Slide(
            "Highlights",
            (
                "Revenue 48.6 million USD, +14 % year on year",
                "Gross margin 41.2 %",
                "Three new OEM accounts in Southeast Asia",
            ),
            notes=squash("""Start with the revenue figure: this is our best quarter so far.
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
            notes=squash("""Churn went up mainly because our Tianjin distributor, Huaxin
            Trading, exited the market in April. We expect to win back about half of that
            volume through direct sales by the end of Q4."""),
        ),
        Slide(
            "Pipeline",
            ("Weighted pipeline 61 million USD", "Tenders decided in Q3: 7"),
            notes=squash("""The largest open item is the Jakarta water utility tender, worth
            about 3.2 million USD, to be decided in September. Li Na owns the tender; the
            technical offer is due on 15 August."""),
        ),
        Slide(
            "Next Steps",
            ("Hiring plan for Q3", "Distributor search in North China", "Price review"),
            notes=squash("""For Q3 we plan to hire 12 field sales engineers, eight of them in
            China. The price review will be presented at the September meeting."""),
        ),
    )
    render_pptx("Q2 2025 Sales Review", "Kestrel Sales", utc(2025, 7, 7), slides, path)


def launch_deck(path: Path) -> None:
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
    render_pptx("HT-900 新品发布", "凯斯特仪器 产品管理部", utc(2025, 6, 10), slides, path)
