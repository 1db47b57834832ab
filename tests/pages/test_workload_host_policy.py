"""AppTest of the "Your traffic" page's second-tier section: the host tier's eviction policy (LRU, the default,
or ARC) is a choice beside the host sizes, and the curves drawn are the core's exact grid for that policy."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from kvviz.analysis.workload.columns import as_columns
from kvviz.analysis.workload.example import EXAMPLE_PATH
from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.tiers import two_tier_grid
from kvviz_app.shell.i18n import texts

T = texts("workload")
ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "workload.py")


def _tier_curves(at: AppTest) -> dict[str, tuple]:
    """The hit-rate-by-source chart's lines by name: (device capacities, hit rates)."""
    import json

    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        if fig["layout"].get("title", {}).get("text", "") == T.TIER_HIT_TITLE:
            return {d["name"]: (tuple(d["x"]), tuple(d["y"])) for d in fig["data"]}
    raise AssertionError("no hit-rate-by-source chart on the page")


def test_the_host_tiers_policy_is_a_choice_and_the_curves_follow_it():
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    assert not at.exception and not at.error
    choice = at.selectbox(key="wl_host_policy")
    assert choice.value == "lru" and choice.label == T.TIER_POLICY
    hosts = sorted(at.multiselect(key="wl_hosts").value)
    lru = _tier_curves(at)
    choice.set_value("arc").run()
    assert not at.exception and not at.error
    arc = _tier_curves(at)
    devices, _ = arc[T.TIER_DEVICE]
    grid = two_tier_grid(as_columns(parse_trace(EXAMPLE_PATH.read_bytes())), list(devices), [0, *hosts],
                         policy="arc")
    for host in hosts:
        rows = sorted((r for r in grid.rows(1.0) if r["host_blocks"] == host), key=lambda r: r["device_blocks"])
        name = T.TIER_TOTAL.format(host=f"{host:,}")
        assert arc[name][1] == tuple(r["hit_rate"] for r in rows), name
    assert arc != lru  # the example's host tier keeps other blocks under ARC


def test_the_policy_choice_in_russian():
    R = texts("workload", "ru")
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.query_params["lang"] = "ru"
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="wl_host_policy").label == R.TIER_POLICY != T.TIER_POLICY
