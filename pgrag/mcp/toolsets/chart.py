"""The `chart` toolset: `echart_generate` turns records into an ECharts `option` a front
end renders as is. The option building is `pgrag.charts`; this module only publishes it."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from pgrag.charts import MAX_RECORDS, ChartData, generate_option
from pgrag.mcp.app_state import enveloped
from pgrag.mcp.envelope import Envelope, Status


async def echart_generate(
    chart_type: Annotated[
        str,
        Field(
            min_length=1,
            max_length=40,
            description="bar | line | pie | scatter | graph (aliases such as column, "
            "area, donut, bubble, network are understood)",
        ),
    ],
    ctx: Context[Any, Any],
    title: Annotated[str | None, Field(max_length=200)] = None,
    data: Annotated[
        list[Any] | None,
        Field(
            max_length=MAX_RECORDS,
            description='records, e.g. [{"month": "Jan", "sales": 120}, ...] '
            "(not needed for graph)",
        ),
    ] = None,
    mapping: Annotated[
        dict[str, Any] | None,
        Field(
            description="which field plays which role: x (categories / x values), y (a field "
            "or a list of fields to plot), series (one series per value of this field), "
            "name + value (pie), size (bubble). Seed spellings xField/yField/seriesField "
            "work; missing roles are guessed from the data"
        ),
    ] = None,
    options: Annotated[
        dict[str, Any] | None,
        Field(
            description="unit, stack, smooth, area, horizontal, donut, show_labels, "
            "subtitle, x_name, y_name, layout (graph: force|circular|none), and any "
            "top-level ECharts component (color, legend, grid, ...) to merge in"
        ),
    ] = None,
    graph: Annotated[
        dict[str, Any] | None,
        Field(
            description='for chart_type graph: {"nodes": [{"id", "name", "category"}], '
            '"links": [{"source", "target", "label"}]}; graph-tool output (label, '
            "from_id, to_id, type) works as is"
        ),
    ] = None,
) -> Annotated[CallToolResult, Envelope[ChartData]]:
    """Turn records (or a node/link graph) into an ECharts `option` ready for
    chart.setOption: fills in title, tooltip, legend, grid, axis and series types,
    matches field names loosely, guesses missing x/y fields, converts numbers sent as
    text, and lists every correction it made."""
    result = generate_option(
        chart_type, title=title, data=data, mapping=mapping, options=options, graph=graph
    )
    message = "CHART_GENERATED_WITH_CORRECTIONS" if result.corrections else "CHART_GENERATED"
    return Envelope[ChartData](data=result, status=Status(message=message))  # type: ignore[return-value]


def register(server: MCPServer[Any]) -> None:
    """Publish `echart_generate` (read-only, no outside world)."""
    server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))(
        enveloped()(echart_generate)
    )
