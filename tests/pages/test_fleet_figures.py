"""The fleet view's pictures: a prefix shared by several replicas is one trace (one colour) across their
columns, the rest one grey stack; the heat strip's cells say reusable / after a miss / not held, and the
router's pick is the marked row."""

from __future__ import annotations

from kvviz_app.live.figures_fleet import SHARED_COLOURS, UNSHARED, heat_strip_figure, prefix_columns_figure
from kvviz_app.shell.i18n import texts

T = texts("fleet")


def test_shared_prefix_is_one_colour_across_columns() -> None:
    columns = [("a", [("sys1", 6), ("own-a", 2)], 1), ("b", [("sys1", 6)], 0), ("c", [("sys1", 6), ("sys2", 3)], 0),
               ("d", [("sys2", 3)], 4)]
    fig = prefix_columns_figure(columns, "c", "t", T.COLUMNS_LABELS)
    bars = [t for t in fig.data if t.type == "bar"]
    sys1, sys2, rest = bars
    assert list(sys1.y) == [6, 6, 6, 0] and sys1.marker.color == SHARED_COLOURS[0]  # on 3 replicas: first colour
    assert list(sys2.y) == [0, 0, 3, 3] and sys2.marker.color == SHARED_COLOURS[1]
    assert list(rest.y) == [3, 0, 0, 4] and rest.marker.color == UNSHARED  # own-a + a's other block; d's other 4
    assert fig.layout.annotations[0].x == "c"


def test_columns_name_each_replicas_blocks_by_medium() -> None:
    columns = [("a", [("sys1", 6)], 0), ("b", [("sys1", 6)], 2)]
    fig = prefix_columns_figure(columns, None, "t", T.COLUMNS_LABELS, media=["GPU 6", "GPU 2 · CPU 8"])
    assert list(fig.layout.xaxis.tickvals) == ["a", "b"]
    assert list(fig.layout.xaxis.ticktext) == ["a<br>GPU 6", "b<br>GPU 2 · CPU 8"]
    assert prefix_columns_figure(columns, None, "t", T.COLUMNS_LABELS).layout.xaxis.ticktext is None


def test_heat_strip_cells_and_the_pick_row() -> None:
    fig = heat_strip_figure(["a", "b"], [["GPU", None, "GPU"], ["CPU", "CPU", None]], [1, 2], [False, True], "a", 16,
                            "t", T.STRIP_LABELS)
    heat = fig.data[0]
    assert [list(r) for r in heat.z] == [[3, 0, 1], [2, 2, 0]]  # a: GPU hit, miss, held after the miss
    assert list(heat.y) == [T.STRIP_LABELS["pick_row"].format(name="a"), "b" + T.STRIP_LABELS["stale_row"]]
    assert list(heat.x) == [8, 24, 40] and list(fig.layout.xaxis.range) == [0, 48]  # cells centred on their blocks
