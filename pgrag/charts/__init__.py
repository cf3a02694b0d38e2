"""ECharts options from records or a node/link graph, with defaults and corrections.

The option a front end renders as is: title, tooltip, legend, grid, axis types and series
types are filled in, and what a model typically gets slightly wrong is corrected: chart type
aliases (column → bar, donut → pie), mapping keys in other spellings (`xField`, `yField`,
`seriesField`), field names that differ in case, spacing or by a typo from the data's,
numbers sent as text ("1,234", "12%"), missing x / y (guessed from the data), and graph links
given as graph-toolset relationships (`from_id`/`to_id`/`type`). Every correction is listed in
the answer. Pure Python: no database, no network, no MCP (the `chart` toolset calls it).
"""

from __future__ import annotations

from pgrag.charts.models import MAX_RECORDS, ChartData
from pgrag.charts.options import generate_option

__all__ = ["MAX_RECORDS", "ChartData", "generate_option"]
