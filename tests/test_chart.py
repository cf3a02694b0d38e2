"""The `chart` toolset (SPEC §5.3, seed 002 §4) through a real MCP client: an ECharts option
for every chart type with its defaults, the seed's field-mapping corrections, errors that
name the missing field, and the options rendered by ECharts in headless Chromium.

The rendering test needs ECharts from tests/js (`npm --prefix tests/js ci`) and Chromium
(`apt-get install -y chromium`); `.ci/run` installs both. Without them it fails and says so.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pgrag.mcp.server import build_server
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
ECHARTS_JS = HERE / "js" / "node_modules" / "echarts" / "dist" / "echarts.min.js"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--hide-scrollbars",
    "--virtual-time-budget=20000",  # animation frames and timers run in virtual time
]

SALES = [
    {"Month": "Jan", "Region": "North", "Revenue": "1,200", "Units": 30},
    {"Month": "Feb", "Region": "North", "Revenue": "1,500", "Units": 41},
    {"Month": "Mar", "Region": "North", "Revenue": "1,100", "Units": 28},
    {"Month": "Jan", "Region": "South", "Revenue": "700", "Units": 20},
    {"Month": "Feb", "Region": "South", "Revenue": "950", "Units": 26},
    {"Month": "Mar", "Region": "South", "Revenue": "1,300", "Units": 35},
]
WIDE = [
    {"month": "2024-01", "visits": 120, "signups": 12},
    {"month": "2024-02", "visits": 180, "signups": 20},
    {"month": "2024-03", "visits": 160, "signups": 15},
    {"month": "2024-04", "visits": 240, "signups": 31},
]
SHARES = [
    {"浏览器": "Chrome", "份额": 64.5},
    {"浏览器": "Safari", "份额": 18.8},
    {"浏览器": "Firefox", "份额": 3.2},
    {"浏览器": "Edge", "份额": 5.1},
]
PEOPLE = [
    {"height": 1.62, "weight": 55, "age": 23, "sex": "F"},
    {"height": 1.75, "weight": 72, "age": 35, "sex": "M"},
    {"height": 1.81, "weight": 80, "age": 41, "sex": "M"},
    {"height": 1.68, "weight": 61, "age": 29, "sex": "F"},
]
DAILY = [
    {"day": (date(2024, 5, 1) + timedelta(days=d)).isoformat(), "reading": (d * 37) % 23 + 5}
    for d in range(40)
]
GRAPH = {
    "nodes": [
        {"id": "pg", "name": "PostgreSQL", "category": "Database"},
        {"id": "pgv", "name": "pgvector", "category": "Extension"},
        {"id": "trgm", "name": "pg_trgm", "category": "Extension"},
        {"id": "rag", "name": "pgrag", "category": "Application"},
    ],
    "links": [
        {"source": "pgv", "target": "pg", "label": "extends"},
        {"source": "trgm", "target": "pg", "label": "extends"},
        {"source": "rag", "target": "pgv", "label": "uses"},
        {"source": "rag", "target": "trgm", "label": "uses"},
    ],
}


@contextlib.asynccontextmanager
async def chart_client(dsn: str, toolsets: str = "core,chart") -> AsyncIterator[Client]:
    server = build_server(
        load_settings(database_url=dsn, toolsets=toolsets, embedding_model="hash/384")
    )
    async with Client(server, raise_exceptions=True) as client:
        yield client


async def generate(client: Client, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("echart_generate", args)
    payload = result.structured_content
    assert payload is not None
    assert payload["ok"] and not result.is_error, payload["error"]
    data: dict[str, Any] = payload["data"]
    json.dumps(data["option"], allow_nan=False)  # plain JSON: no NaN, no functions
    return data


async def refused(client: Client, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("echart_generate", args)
    payload = result.structured_content
    assert payload is not None and result.is_error and not payload["ok"]
    assert payload["error"]["code"] == "INVALID_ARGUMENT", payload["error"]
    return dict(payload["error"])


def series_types(option: dict[str, Any]) -> list[str]:
    return [s["type"] for s in option["series"]]


async def every_chart(client: Client) -> dict[str, dict[str, Any]]:
    """One option per chart type (plus a horizontal stacked bar), as the tool makes them."""
    return {
        "bar": (
            await generate(
                client,
                chart_type="bar",
                title="Revenue by month",
                data=SALES,
                mapping={"xField": "month", "yField": "revenue", "seriesField": "region"},
                options={"unit": "USD", "stack": True},
            )
        )["option"],
        "bar_horizontal": (
            await generate(
                client,
                chart_type="column",
                data=SALES,
                mapping={"x": "Region", "y": "Units"},
                options={"horizontal": True, "show_labels": True},
            )
        )["option"],
        "line": (
            await generate(
                client,
                chart_type="line",
                title="Traffic",
                data=WIDE,
                options={"smooth": True, "area": True},
            )
        )["option"],
        "pie": (await generate(client, chart_type="donut", title="浏览器份额", data=SHARES))[
            "option"
        ],
        "scatter": (
            await generate(
                client,
                chart_type="bubble",
                data=PEOPLE,
                mapping={"x": "height", "y": "weight", "size": "age", "series": "sex"},
            )
        )["option"],
        "graph": (await generate(client, chart_type="graph", title="Stack", graph=GRAPH))["option"],
        "line_long": (
            await generate(
                client,
                chart_type="timeseries",
                title="Daily readings",
                data=DAILY,
                mapping={"x": "day", "y": "reading"},
            )
        )["option"],
    }


# ----------------------------------------------------------------------- option shapes


async def test_every_chart_type_gets_a_complete_option(dsn: str) -> None:
    async with chart_client(dsn) as c:
        charts = await every_chart(c)

    bar = charts["bar"]
    assert bar["title"]["text"] == "Revenue by month"
    assert bar["tooltip"]["trigger"] == "axis"
    assert bar["grid"]["containLabel"] is True
    assert bar["xAxis"]["type"] == "category"
    assert bar["xAxis"]["data"] == ["Jan", "Feb", "Mar"]
    assert (bar["xAxis"]["name"], bar["xAxis"]["nameLocation"]) == ("Month", "middle")
    assert "dataZoom" not in bar
    assert bar["yAxis"]["type"] == "value"
    assert bar["yAxis"]["axisLabel"]["formatter"] == "{value} USD"
    assert bar["legend"]["data"] == ["North", "South"] and bar["legend"]["show"] is True
    assert series_types(bar) == ["bar", "bar"]
    assert [s["data"] for s in bar["series"]] == [[1200, 1500, 1100], [700, 950, 1300]]
    assert {s["stack"] for s in bar["series"]} == {"total"}

    horizontal = charts["bar_horizontal"]
    assert horizontal["xAxis"]["type"] == "value"
    assert horizontal["yAxis"]["type"] == "category"
    assert horizontal["yAxis"]["data"] == ["North", "South"]
    assert horizontal["series"][0]["data"] == [99, 81]  # repeated categories summed
    assert horizontal["series"][0]["label"]["show"] is True

    line = charts["line"]
    assert series_types(line) == ["line", "line"]
    assert [s["name"] for s in line["series"]] == ["visits", "signups"]
    assert line["xAxis"]["data"] == ["2024-01", "2024-02", "2024-03", "2024-04"]
    assert line["xAxis"]["boundaryGap"] is False
    assert all(s["smooth"] is True and s["areaStyle"] == {} for s in line["series"])
    assert line["tooltip"]["trigger"] == "axis"

    pie = charts["pie"]
    assert "xAxis" not in pie and "yAxis" not in pie
    (slices,) = pie["series"]
    assert slices["type"] == "pie" and slices["radius"] == ["40%", "70%"]
    assert slices["data"][0] == {"name": "Chrome", "value": 64.5}
    assert pie["legend"]["data"] == ["Chrome", "Safari", "Firefox", "Edge"]
    assert pie["tooltip"]["trigger"] == "item"

    scatter = charts["scatter"]
    assert scatter["xAxis"]["type"] == "value" and scatter["yAxis"]["type"] == "value"
    assert series_types(scatter) == ["scatter", "scatter"]
    assert [s["name"] for s in scatter["series"]] == ["F", "M"]
    assert scatter["series"][0]["data"] == [[1.62, 55, 23], [1.68, 61, 29]]
    assert scatter["visualMap"]["dimension"] == 2 and scatter["visualMap"]["max"] == 41

    long = charts["line_long"]
    assert len(long["xAxis"]["data"]) == 40 and long["xAxis"]["axisLabel"]["rotate"] == 30
    assert [z["type"] for z in long["dataZoom"]] == ["inside", "slider"]
    assert long["series"][0]["showSymbol"] is True

    graph = charts["graph"]
    (network,) = graph["series"]
    assert network["type"] == "graph" and network["layout"] == "force"
    assert [cat["name"] for cat in network["categories"]] == [
        "Database",
        "Extension",
        "Application",
    ]
    assert [n["category"] for n in network["data"]] == [0, 1, 1, 2]
    assert network["links"][0] == {"source": "pgv", "target": "pg", "value": "extends"}
    assert network["edgeLabel"]["show"] is True
    assert graph["legend"]["data"] == ["Database", "Extension", "Application"]


async def test_seed_mapping_is_corrected_and_reported(dsn: str) -> None:
    async with chart_client(dsn) as c:
        out = await generate(
            c,
            chart_type="Bar Chart",
            data=SALES,
            mapping={"x_field": "MONTH", "yField": "revenu", "series_field": "Region"},
        )
        assert out["chart_type"] == "bar"
        assert out["fields"] == {"x": "Month", "y": ["Revenue"], "series": "Region"}
        notes = " | ".join(out["corrections"])
        for expected in (
            "chart_type 'Bar Chart' read as 'bar'",
            "mapping.x 'MONTH' matched field 'Month'",
            "mapping.y 'revenu' matched the similar field 'Revenue'",
            "numbers given as text in 'Revenue' converted",
        ):
            assert expected in notes
        assert out["option"]["series"][1]["data"] == [700, 950, 1300]

        # nothing mapped: x is the text field, y every numeric field
        guessed = await generate(c, chart_type="line", data=WIDE)
        assert guessed["fields"] == {"x": "month", "y": ["visits", "signups"]}
        assert any("mapping.x missing" in n for n in guessed["corrections"])

        pie = await generate(c, chart_type="pie", data=SHARES, mapping={"x": "浏览器", "y": "份额"})
        assert pie["fields"] == {"name": "浏览器", "value": "份额"}
        assert sum(d["value"] for d in pie["option"]["series"][0]["data"]) == pytest.approx(91.6)

        clean = await call_status(
            c, chart_type="bar", data=WIDE, mapping={"x": "month", "y": "visits"}
        )
        assert clean == "CHART_GENERATED"

        # options: known knobs in any spelling, ECharts components merged in
        styled = await generate(
            c,
            chart_type="line",
            data=WIDE,
            mapping={"x": "month", "y": "visits"},
            options={
                "Smooth": True,
                "color": ["#ff0000"],
                "echarts": {"series": {"symbol": "none"}},
            },
        )
        assert styled["option"]["color"] == ["#ff0000"]
        assert styled["option"]["series"][0]["smooth"] is True
        assert styled["option"]["series"][0]["symbol"] == "none"


async def call_status(client: Client, **args: Any) -> str:
    result = await client.call_tool("echart_generate", args)
    assert result.structured_content is not None
    return str(result.structured_content["status"]["message"])


async def test_graph_tool_output_charts_as_is(dsn: str) -> None:
    async with chart_client(dsn, toolsets="core,graph,chart") as c:
        ids = {}
        for name, label in (("Ada", "Person"), ("Engine", "Concept"), ("London", "Location")):
            r = await c.call_tool("graph_create_node", {"label": label, "name": name})
            ids[name] = r.structured_content["data"]["id"]
        for src, dst, kind in (("Ada", "Engine", "RELATED_TO"), ("Ada", "London", "LOCATED_IN")):
            await c.call_tool(
                "graph_create_relationship", {"from_id": ids[src], "to_id": ids[dst], "type": kind}
            )
        hood = (await c.call_tool("graph_find_neighbors", {"id": ids["Ada"]})).structured_content
        graph = {
            "nodes": [hood["data"]["node"], *hood["data"]["nodes"]],
            "relationships": hood["data"]["relationships"],
        }
        out = await generate(c, chart_type="network", graph=graph)
    (series,) = out["option"]["series"]
    by_id = {n["id"]: n for n in series["data"]}
    assert set(by_id) == set(ids.values())
    assert by_id[ids["Ada"]]["name"] == "Ada"
    categories = [cat["name"] for cat in series["categories"]]  # in the order nodes come
    assert categories[0] == "Person" and set(categories) == {"Person", "Concept", "Location"}
    assert by_id[ids["London"]]["category"] == categories.index("Location")
    links = {(link["source"], link["target"], link["value"]) for link in series["links"]}
    assert links == {
        (ids["Ada"], ids["Engine"], "RELATED_TO"),
        (ids["Ada"], ids["London"], "LOCATED_IN"),
    }
    assert "graph.relationships read as graph.links" in out["corrections"]


async def test_missing_or_wrong_fields_are_named(dsn: str) -> None:
    async with chart_client(dsn) as c:
        err = await refused(c, chart_type="bar", data=SALES, mapping={"x": "Month", "y": "profit"})
        assert err["detail"]["field"] == "mapping.y"
        assert "profit" in err["message"] and "Revenue" in err["message"]
        assert err["detail"]["available"] == ["Month", "Region", "Revenue", "Units"]

        err = await refused(c, chart_type="line", data=SALES, mapping={"x": "Month", "y": "Region"})
        assert err["detail"]["field"] == "mapping.y" and "not numeric" in err["message"]

        err = await refused(c, chart_type="bar", mapping={"x": "a", "y": "b"})
        assert err["detail"]["field"] == "data"

        err = await refused(c, chart_type="pie", data=[{"name": "a", "kind": "b"}])
        assert err["detail"]["field"] == "mapping.value"

        err = await refused(c, chart_type="graph", graph={"links": []})
        assert err["detail"]["field"] == "graph.nodes"

        err = await refused(
            c, chart_type="graph", graph={"nodes": [{"id": "a"}], "links": [{"source": "a"}]}
        )
        assert err["detail"]["field"] == "graph.links[0].target"

        err = await refused(c, chart_type="radar", data=SALES)
        assert err["detail"]["field"] == "chart_type" and "bar" in err["message"]

        huge = [{"label": f"category number {i:05d}", "value": i} for i in range(9000)]
        err = await refused(c, chart_type="bar", data=huge)
        assert err["detail"]["field"] == "data" and "aggregate" in err["message"]


# ------------------------------------------------------------------------- rendering


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    pytest.fail(
        "the chart rendering test needs headless Chromium: `apt-get install -y chromium` "
        "(.ci/run installs it when it runs as root)"
    )


def _echarts() -> Path:
    if not ECHARTS_JS.is_file():
        pytest.fail(
            f"the chart rendering test needs ECharts at {ECHARTS_JS}: run "
            "`npm --prefix tests/js ci` (.ci/run does)"
        )
    return ECHARTS_JS


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>PENDING</title>
<script src="{echarts}"></script>
<style>body {{ margin: 0; background: #fff; }}
.chart {{ width: 640px; height: 420px; display: inline-block; }}</style></head>
<body><div id="charts"></div><pre id="result"></pre>
<script>
const options = {options};
const errors = [];
window.addEventListener('error', e => errors.push(String(e.message)));
const consoleError = console.error;
console.error = (...args) => {{ errors.push(args.map(String).join(' ')); consoleError(...args); }};

function rgb(hex) {{
  const h = hex.replace('#', '');
  return [0, 2, 4].map(i => parseInt(h.substr(i, 2), 16));
}}

function measure(name, chart, div) {{
  const canvas = div.querySelector('canvas');
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const first = rgb(chart.getOption().color[0]);
  let inked = 0, series0 = 0;
  for (let i = 0; i < pixels.length; i += 4) {{
    if (pixels[i + 3] === 0) continue;
    inked++;
    if (pixels[i + 3] > 100 && Math.abs(pixels[i] - first[0]) < 14
        && Math.abs(pixels[i + 1] - first[1]) < 14 && Math.abs(pixels[i + 2] - first[2]) < 14) {{
      series0++;
    }}
  }}
  const model = chart.getModel();
  const counts = model.getSeries().map(s => s.getData().count());
  return {{ inked, series0, counts, types: model.getSeries().map(s => s.subType),
            pixels: canvas.width * canvas.height }};
}}

const results = {{}};
const pending = Object.entries(options).map(([name, option]) => new Promise(resolve => {{
  const div = document.createElement('div');
  div.className = 'chart';
  document.getElementById('charts').appendChild(div);
  try {{
    const chart = echarts.init(div, null, {{ renderer: 'canvas', width: 640, height: 420 }});
    let done = false;
    chart.on('finished', () => {{
      if (done) return;
      done = true;
      try {{ results[name] = measure(name, chart, div); }}
      catch (e) {{ errors.push(name + ': ' + e.message); }}
      resolve();
    }});
    chart.setOption(Object.assign({{}}, option, {{ animation: false }}));
  }} catch (e) {{
    errors.push(name + ': ' + e.message);
    resolve();
  }}
}}));
Promise.all(pending).then(() => {{
  document.getElementById('result').textContent = JSON.stringify({{ results, errors }});
  document.title = errors.length ? 'ERRORS' : 'RENDERED';
}});
</script></body></html>
"""


def _run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,  # a hang guard, not a performance assertion
    )


@pytest.mark.requires("chromium", "tests/js")
async def test_options_render_in_headless_chromium(dsn: str, tmp_path: Path) -> None:
    chromium, echarts_js = _chromium(), _echarts()
    async with chart_client(dsn) as c:
        charts = await every_chart(c)
    page = tmp_path / "charts.html"
    page.write_text(
        PAGE.format(
            echarts=echarts_js.as_uri(),
            options=json.dumps(charts, ensure_ascii=False).replace("</", "<\\/"),
        ),
        encoding="utf-8",
    )

    dump = _run_chromium(chromium, tmp_path / "profile-dom", "--dump-dom", page.as_uri())
    title = re.search(r"<title>(.*?)</title>", dump.stdout)
    result = re.search(r'<pre id="result">(.*?)</pre>', dump.stdout, re.S)
    assert title and result, (
        f"chromium printed no page (rc {dump.returncode}):\n{dump.stderr[-3000:]}"
    )
    report = json.loads(html.unescape(result.group(1)))
    assert title.group(1) == "RENDERED", report["errors"]
    assert report["errors"] == []
    assert set(report["results"]) == set(charts)
    for name, option in charts.items():
        drawn = report["results"][name]
        # ECharts accepted every series with all of its data ...
        assert drawn["types"] == series_types(option), name
        expected = [len(s["data"]) for s in option["series"]]
        assert drawn["counts"] == expected, name
        # ... and painted it: ink on the canvas, some of it in the first series' colour
        assert drawn["inked"] > drawn["pixels"] * 0.01, (name, drawn)
        assert drawn["series0"] > 50, (name, drawn)

    shot = tmp_path / "charts.png"
    taken = _run_chromium(
        chromium,
        tmp_path / "profile-shot",
        "--window-size=1300,1800",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert shot.is_file(), f"no screenshot (rc {taken.returncode}):\n{taken.stderr[-3000:]}"
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, f"screenshot at {shot}"
    print(f"chart screenshot: {shot}")
