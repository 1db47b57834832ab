"""The block-table page's host-tier colours stand apart from the device pool's: every fill or outline that
means "host memory" is far (CIELAB distance) from every device-pool and block-table fill it is drawn beside,
under normal vision and simulated protanopia, deuteranopia and tritanopia (Machado, Oliveira and Fernandes
2009, severity 1), so "only in host memory" never reads as the pool's amber "free but still cached"."""

from __future__ import annotations

import numpy as np
import pytest

from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz_app.block_table import figures as F
from kvviz_app.block_table import figures_host as FH
from kvviz_app.shell.cells import DARK_FILLS

#: linear-RGB matrices simulating each colour vision deficiency
VISION = {
    "normal": np.eye(3),
    "protan": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                        [-0.003882, -0.048116, 1.051998]]),
    "deutan": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                        [-0.011820, 0.042940, 0.968881]]),
    "tritan": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                        [0.004733, 0.691367, 0.303900]]),
}
#: the smallest distance kept: about twice a difference a reader notices side by side
MIN_DISTANCE = 15.0


def _lab(hex_colour: str, vision: str) -> np.ndarray:
    srgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    rgb = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    rgb = np.clip(VISION[vision] @ rgb, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _distance(a: str, b: str) -> float:
    return min(float(np.linalg.norm(_lab(a, v) - _lab(b, v))) for v in VISION)


HOST = {"host-only slot": FH.HOST_COLOURS["host_only"], "slot cached on the device too": FH.HOST_COLOURS["both"],
        "block loaded from host": F.SOURCE_COLOURS["host"], "loaded-from-host outline": F.EVENT_COLOURS["host_load"]}
DEVICE = {**{f"pool {k}": c for k, c in F.POOL_COLOURS.items()},
          **{f"table {k}": c for k, c in F.SOURCE_COLOURS.items() if k != "host"}}


@pytest.mark.parametrize("host_name", list(HOST))
def test_host_colours_stay_apart_from_the_device_pools_in_every_vision(host_name):
    colour = HOST[host_name]
    close = {name: round(_distance(colour, c), 1) for name, c in DEVICE.items()
             if _distance(colour, c) < MIN_DISTANCE}
    assert not close, (host_name, colour, close)


def test_the_two_host_slot_states_and_empty_differ():
    only, both, empty = (FH.HOST_COLOURS[k] for k in ("host_only", "both", "empty"))
    assert _distance(only, both) >= MIN_DISTANCE and _distance(both, empty) >= MIN_DISTANCE


def test_figures_draw_the_host_colours_and_white_text_on_the_dark_one():
    run = play_scenario(load_builtin("pool_pressure").with_host_tier(16))
    k = next(i for i in range(1, run.num_steps + 1) if any(r.host for r in run.hits_by_source(i)))
    fills = {c for trace in FH.host_pool_figure(run.view_at(k)).data if trace.type == "heatmap"
             for _, c in trace.colorscale}
    assert FH.HOST_COLOURS["host_only"] in fills and FH.HOST_COLOURS["both"] in fills
    table = F.block_tables_figure(run.view_at(k))
    assert F.SOURCE_COLOURS["host"] in {c for t in table.data if t.type == "heatmap" for _, c in t.colorscale}
    assert FH.HOST_COLOURS["host_only"] in DARK_FILLS and FH.HOST_COLOURS["both"] not in DARK_FILLS
