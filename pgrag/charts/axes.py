"""The frame of a bar, line or scatter chart: grid margins sized to the legend, long or many
labels and a horizontal layout; the two axes; and a zoom slider when categories are many."""

from __future__ import annotations

from typing import Any

from pgrag.charts.layout import unit_label


def _grid(top: int, legend: int, categories: int, rotate: bool, horizontal: bool) -> dict[str, Any]:
    many = categories > 30
    return {
        "left": "3%",
        "right": 48 if horizontal and many else "4%",
        "top": top + (36 if legend > 1 else 12) + (16 if horizontal else 0),
        "bottom": 40 + (28 if rotate else 0) + (32 if many and not horizontal else 0),
        "containLabel": True,
    }


def _axes(
    kind: str,
    categories: list[Any],
    names: tuple[str, str],
    opts: dict[str, Any],
    horizontal: bool,
    x_is_value: bool,
    rotate: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(xAxis, yAxis): categories (or values, for a numeric scatter x) against values."""
    if kind == "scatter":
        x_axis: dict[str, Any] = (
            {"type": "value", "scale": True, "boundaryGap": ["5%", "5%"]}
            if x_is_value
            else {"type": "category", "data": categories}
        )
        y_axis: dict[str, Any] = {"type": "value", "scale": True, "boundaryGap": ["5%", "5%"]}
    else:
        x_axis = {"type": "category", "data": categories, "boundaryGap": kind == "bar"}
        y_axis = {"type": "value"}
        if rotate:
            x_axis["axisLabel"] = {"rotate": 30, "hideOverlap": True}
    x_axis["name"], y_axis["name"] = names
    y_axis["axisLabel"] = {**y_axis.get("axisLabel", {}), **unit_label(opts.get("unit"))}
    if not y_axis["axisLabel"]:
        del y_axis["axisLabel"]
    if horizontal:
        x_axis, y_axis = y_axis, x_axis
        y_axis["inverse"] = True  # first category on top, as read
        y_axis["nameLocation"] = "start"  # above the axis (it is inverted)
    # the horizontal axis' name goes under its labels, where the grid keeps room for it
    x_axis["nameLocation"] = "middle"
    x_axis["nameGap"] = 56 if rotate and not horizontal else 28
    return x_axis, y_axis


def _zoom(horizontal: bool) -> list[dict[str, Any]]:
    """Wheel / drag zoom plus a slider along the category axis."""
    if horizontal:
        slider = {"type": "slider", "yAxisIndex": 0, "width": 18, "right": 8}
        return [{"type": "inside", "yAxisIndex": 0}, slider]
    slider = {"type": "slider", "xAxisIndex": 0, "height": 18, "bottom": 8}
    return [{"type": "inside", "xAxisIndex": 0}, slider]


def frame(
    kind: str,
    categories: list[Any],
    legend: int,
    names: tuple[str, str],
    opts: dict[str, Any],
    top: int,
    *,
    horizontal: bool,
    x_is_value: bool,
) -> dict[str, Any]:
    """grid, xAxis, yAxis and (for many categories) dataZoom, in the option's key order.

    `legend` is the number of legend entries; `names` the x and y axis names."""
    many = len(categories) > 30
    rotate = len(categories) > 8 and max((len(str(c)) for c in categories), default=0) > 6
    out: dict[str, Any] = {"grid": _grid(top, legend, len(categories), rotate, horizontal)}
    out["xAxis"], out["yAxis"] = _axes(
        kind, categories, names, opts, horizontal, x_is_value, rotate
    )
    if many and kind != "scatter":
        out["dataZoom"] = _zoom(horizontal)
    return out
