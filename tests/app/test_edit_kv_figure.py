"""The Edit page's K/V difference map: the "first changed token" label stays inside the plot, reading away
from the nearer edge (an edit near the end used to run it into the colour bar's labels at 1400 px)."""

from __future__ import annotations

import numpy as np
import pytest

from kvviz_app.edit.figures_kv import kv_heatmap_figure


@pytest.mark.parametrize("first, side", [(3, "left"), (40, "left"), (60, "right"), (97, "right")])
def test_first_change_label_reads_away_from_the_nearer_edge(first, side):
    heat = np.zeros((30, 100))
    heat[:, first:] = 0.01
    fig = kv_heatmap_figure(heat, "K", first)
    (label,) = fig.layout.annotations
    assert label.x == first - 0.5 and label.xanchor == side


def test_no_label_without_a_change():
    assert not kv_heatmap_figure(np.zeros((30, 10)), "V", None).layout.annotations
