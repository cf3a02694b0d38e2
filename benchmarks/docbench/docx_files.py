"""docbench's DOCX files: contracts, the leave policy and a Chinese incident report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from docx import Document as new_docx
from docx.oxml.ns import qn
from kbcommon import normalise_ooxml, squash, utc, zh

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


def render_docx(spec: DocxDoc, path: Path) -> None:
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
    normalise_ooxml(path, spec.created)


_BREAK: DocxBlock = ("break", "")


def supply_agreement() -> DocxDoc:
    p = lambda t: ("p", squash(t))  # noqa: E731
    return DocxDoc(
        title="Supply Agreement - Northstar Metals",
        author="Kestrel Instruments Legal",
        created=utc(2025, 2, 14),
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


def logistics_agreement() -> DocxDoc:
    p = lambda t: ("p", squash(t))  # noqa: E731
    return DocxDoc(
        title="Logistics Services Agreement - SwiftCargo",
        author="Kestrel Instruments Legal",
        created=utc(2024, 6, 3),
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


def cloud_sla() -> DocxDoc:
    p = lambda t: ("p", zh(t))  # noqa: E731
    return DocxDoc(
        title="云服务水平协议",
        author="凯斯特仪器 信息技术部",
        created=utc(2024, 12, 20),
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


def leave_policy_zh() -> DocxDoc:
    p = lambda t: ("p", zh(t))  # noqa: E731
    return DocxDoc(
        title="员工休假管理制度",
        author="凯斯特仪器 人力资源部",
        created=utc(2025, 1, 2),
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


def incident_zh() -> DocxDoc:
    p = lambda t: ("p", zh(t))  # noqa: E731
    return DocxDoc(
        title="质量事故报告",
        author="凯斯特仪器 质量部",
        created=utc(2025, 6, 30),
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
