"""What a chart answer holds, the limits on its input, and the list of corrections made."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

CHART_TYPES = ("bar", "line", "pie", "scatter", "graph")
MAX_RECORDS = 10_000
MAX_NODES = 2_000
MAX_LINKS = 10_000
MAX_OPTION_BYTES = 180_000  # the tool's answer must stay under 200 KB


class ChartData(BaseModel):
    option: dict[str, Any] = Field(description="the ECharts option: pass it to chart.setOption")
    chart_type: str
    fields: dict[str, Any] = Field(
        default_factory=dict, description="the data fields each role was mapped to"
    )
    corrections: list[str] = Field(
        default_factory=list, description="what was fixed or guessed in the input"
    )


class Fixes:
    """The corrections made so far, each once and in the order made (the caller reads them)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def add(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)
