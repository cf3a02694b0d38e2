"""The words of the generated knowledge base: deterministic documents of one fictional
company in English, Chinese, or both, each made of sections sized to about one chunk.

Every sentence carries its own numbers, codes and dates, so no two chunks are equal and
the embedding cache (keyed by the chunk text) never spares the model any work: the
benchmark measures embedding, not deduplication.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from enum import StrEnum

from pgrag.tokens import count_tokens


class Lang(StrEnum):
    EN = "en"
    ZH = "zh"
    MIXED = "mixed"


SECTION_TOKENS = 290  # cl100k tokens, as pgrag's chunker counts (its target is 350)

TOPICS = [
    ("procurement", "Procurement", "采购"),
    ("quality", "Quality Assurance", "质量保证"),
    ("logistics", "Logistics", "物流"),
    ("finance", "Finance", "财务"),
    ("security", "Information Security", "信息安全"),
    ("hr", "Human Resources", "人力资源"),
    ("support", "Customer Support", "客户支持"),
    ("research", "Research and Development", "研发"),
    ("facilities", "Facilities", "设施管理"),
    ("sales", "Sales Operations", "销售运营"),
]
_KINDS_EN = ["Handbook", "Procedure", "Report", "Review", "Guideline", "Plan", "Register"]
_KINDS_ZH = ["手册", "操作规程", "报告", "评审记录", "指南", "计划", "登记表"]

_EN_SUBJECTS = [
    "The procurement team", "The site manager", "Each supplier", "The quality engineer",
    "The warehouse lead", "The finance controller", "The on-call engineer", "Every new hire",
    "The audit committee", "The regional sales office", "The product owner",
    "The maintenance crew", "The customer success manager", "The data protection officer",
]  # fmt: skip
_EN_VERBS = [
    "reviews", "approves", "archives", "inspects", "reconciles", "escalates", "updates",
    "signs off", "benchmarks", "schedules", "documents", "verifies", "rejects", "forwards",
]  # fmt: skip
_EN_OBJECTS = [
    "the purchase order", "the calibration certificate", "the incident report",
    "the shipping manifest", "the expense claim", "the access request", "the test protocol",
    "the supplier scorecard", "the maintenance log", "the training record",
    "the budget forecast", "the returns authorisation", "the firmware release note",
]  # fmt: skip
_EN_SITES = ["Suzhou", "Shanghai", "Shenzhen", "Chengdu", "Munich", "Austin", "Singapore"]
_EN_TAILS = [
    "before the end of the quarter", "within five working days", "after the weekly review",
    "unless the budget owner objects", "as described in the previous section",
    "and records the outcome in the register", "so that the next audit finds no gaps",
    "with a copy to the department head", "once the pressure tests have passed",
]  # fmt: skip

_ZH_SUBJECTS = [
    "采购部门", "质量团队", "仓库管理员", "财务部", "研发中心", "客服组", "安全委员会",
    "人力资源部", "现场经理", "维护班组", "审计小组", "区域销售办公室",
]  # fmt: skip
_ZH_VERBS = [
    "负责审核", "需要提交", "每季度检查", "应当更新", "统一归档", "重新评估", "签字确认",
    "及时上报", "定期核对", "书面记录",
]  # fmt: skip
_ZH_OBJECTS = [
    "供应商合同", "检验报告", "库存清单", "报销单据", "设备维护记录", "培训计划", "客户投诉",
    "测试数据", "出货单", "预算预测", "访问权限申请", "固件发布说明",
]  # fmt: skip
_ZH_SITES = ["苏州工厂", "上海办公室", "深圳仓库", "成都研发中心", "无锡分厂", "杭州客服中心"]
_ZH_TAILS = [
    "并在登记表中记录结果", "在下次审计前完成整改", "抄送部门负责人", "以便月度会议复核",
    "如有异议须在三个工作日内提出", "相关附件一并存档", "确保数据与系统一致",
]  # fmt: skip
_MIXED_TERMS = ["SAP", "ERP", "KPI", "SLA", "VPN", "Jira", "Excel", "OKR", "purchase order"]


def _code(rng: random.Random) -> str:
    letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXY") for _ in range(2))
    return f"{letters}-{rng.randint(100, 9999)}"


def _date(rng: random.Random, zh: bool) -> str:
    y, m, d = rng.randint(2023, 2026), rng.randint(1, 12), rng.randint(1, 28)
    return f"{y}年{m}月{d}日" if zh else f"{y}-{m:02d}-{d:02d}"


def sentence_en(rng: random.Random) -> str:
    return (
        f"{rng.choice(_EN_SUBJECTS)} {rng.choice(_EN_VERBS)} {rng.choice(_EN_OBJECTS)} "
        f"{_code(rng)} for {rng.choice(_EN_SITES)} by {_date(rng, False)}, "
        f"{rng.choice(_EN_TAILS)}; the amount is {rng.randint(2, 98000):,} USD."
    )


def sentence_zh(rng: random.Random) -> str:
    return (
        f"{rng.choice(_ZH_SITES)}的{rng.choice(_ZH_SUBJECTS)}{rng.choice(_ZH_VERBS)}"
        f"{rng.choice(_ZH_OBJECTS)}，编号为{_code(rng)}，截止日期为{_date(rng, True)}，"
        f"{rng.choice(_ZH_TAILS)}，金额为{rng.randint(2, 98000)}元。"
    )


def sentence(rng: random.Random, lang: Lang) -> str:
    if lang is Lang.EN:
        return sentence_en(rng)
    if lang is Lang.ZH:
        return sentence_zh(rng)
    if rng.random() < 0.5:
        return sentence_en(rng)
    term = rng.choice(_MIXED_TERMS)
    return sentence_zh(rng).replace("，编号为", f"（在 {term} 中），编号为", 1)


@dataclass
class Section:
    heading: str
    sentences: list[str] = field(default_factory=list)


@dataclass
class DocText:
    title: str
    topic: str
    lang: Lang
    sections: list[Section]

    def append(self, line: str) -> None:
        """A sentence at the very end: what is read last of the document."""
        self.sections[-1].sentences.append(line)


def _heading(rng: random.Random, lang: Lang, n: int, topic_en: str, topic_zh: str) -> str:
    if lang is Lang.ZH or (lang is Lang.MIXED and n % 2):
        return f"第{n}节 {topic_zh}{rng.choice(_KINDS_ZH)}要点"
    return f"Section {n}: {topic_en} {rng.choice(_KINDS_EN).lower()} notes"


def section_count(rng: random.Random, mean: float) -> int:
    """Documents are mostly short, some long (log-normal, clipped): the mean is `mean`."""
    sigma = 0.8
    mu = math.log(mean) - sigma * sigma / 2
    return max(1, min(int(mean * 6), round(rng.lognormvariate(mu, sigma))))


def document(rng: random.Random, lang: Lang, topic_index: int, sections: int, n: int) -> DocText:
    key, topic_en, topic_zh = TOPICS[topic_index % len(TOPICS)]
    if lang is Lang.EN:
        title = f"Kestrel {topic_en} {rng.choice(_KINDS_EN)} {n}"
    elif lang is Lang.ZH:
        title = f"凯斯特{topic_zh}{rng.choice(_KINDS_ZH)}第{n}号"
    else:
        title = f"{topic_en} {rng.choice(_KINDS_EN)} / {topic_zh}{rng.choice(_KINDS_ZH)} {n}"
    out: list[Section] = []
    for s in range(1, sections + 1):
        section = Section(_heading(rng, lang, s, topic_en, topic_zh))
        tokens = count_tokens(section.heading)
        while tokens < SECTION_TOKENS:
            line = sentence(rng, lang)
            section.sentences.append(line)
            tokens += count_tokens(line) + 1
        out.append(section)
    return DocText(title, key, lang, out)
