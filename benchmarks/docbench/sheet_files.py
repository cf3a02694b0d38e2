"""docbench's tables: the XLSX price list (3,000 rows, a discount sheet) and the CSV
inventory export that shares its product codes."""

from __future__ import annotations

import csv
import io
import random
import re
from pathlib import Path
from typing import Any

from kbcommon import normalise_ooxml, utc
from openpyxl import Workbook

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


def write_price_list(path: Path) -> None:
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
    normalise_ooxml(path, utc(2025, 1, 15))


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


def write_inventory(path: Path) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(INVENTORY_HEADER)
    writer.writerows(inventory_rows())
    path.write_bytes(buf.getvalue().encode("utf-8"))
