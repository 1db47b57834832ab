"""AppTest of the "Your traffic" page's host-tier section: its figures carry the exact grid's numbers, the
host sizes can be changed, and the load bandwidth is in bytes a second for the chosen model."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.tiers import two_tier_grid
from kvviz_app.shell.i18n import texts

T = texts("workload")
PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "workload.py")


def _figure(at: AppTest, title: str) -> dict:
    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        text = fig["layout"].get("title", {}).get("text", "")
        if title in text:
            return fig
    raise AssertionError(f"no figure titled {title!r}")


def test_tier_section_shows_the_exact_grid():
    at = AppTest.from_file(PAGE, default_timeout=240).run()
    assert not at.exception and not at.error
    hosts = at.multiselect(key="wl_hosts")
    chosen = sorted(hosts.value)
    assert len(chosen) == 2
    fig = _figure(at, T.TIER_HIT_TITLE)
    trace = parse_trace(EXAMPLE_PATH.read_bytes())
    device = fig["data"][0]["x"]
    grid = two_tier_grid(trace, list(device), [0, *chosen])
    rows = grid.rows()
    by = {(r["host_blocks"], r["device_blocks"]): r for r in rows}
    assert fig["data"][0]["y"] == [by[(0, d)]["device_hit_rate"] for d in device]
    total = next(t for t in fig["data"] if t["name"] == T.TIER_TOTAL.format(host=f"{chosen[-1]:,}"))
    assert total["y"] == [by[(chosen[-1], d)]["hit_rate"] for d in device]
    load = _figure(at, T.TIER_LOAD_TITLE)
    bytes_per_block = 131072 * 512  # the default model, Llama-3-8B fp16, 512-token blocks
    want = [by[(chosen[-1], d)]["host_blocks_loaded"] * bytes_per_block / grid.duration_s for d in device]
    got = next(t for t in load["data"] if t["name"] == T.TIER_LOAD_HOST.format(host=f"{chosen[-1]:,}"))["y"]
    assert all(abs(a - b) <= 1e-6 * max(b, 1.0) for a, b in zip(got, want, strict=True))
    assert max(want) > 0

    hosts.set_value([chosen[0]]).run()
    assert not at.exception and not at.error
    hosts = at.multiselect(key="wl_hosts")
    hosts.set_value([]).run()
    assert not at.exception and not at.error
    assert [t["name"] for t in _figure(at, T.TIER_HIT_TITLE)["data"]] == [T.TIER_DEVICE]
