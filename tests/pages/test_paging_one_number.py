"""The paging page's headline utilisation and its bar chart are one number with one definition
(the headline once said 29.0% / 96.1%, the chart 27% / 95%)."""

from __future__ import annotations

import pytest

from kvviz.analysis.paging.experiment import PagingConfig
from kvviz.analysis.paging.sim import compare_layouts
from kvviz_app.paging import figures as F
from kvviz_app.shell.i18n import texts

T = texts("paging")

CONFIGS = [PagingConfig(), PagingConfig(num_requests=3, memory_tokens=8192), PagingConfig(block_size=32, seed=3)]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_headline_utilisation_is_the_charts_stored_share(cfg):
    cmp = compare_layouts(cfg)
    for res in (cmp.contiguous, cmp.paged):
        assert res.utilisation == pytest.approx(res.waste_share["stored"], abs=1e-12)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_chart_prints_the_headline_number(cfg):
    cmp = compare_layouts(cfg)
    results = {"contiguous": cmp.contiguous, "paged": cmp.paged}
    fig = F.waste_figure(results)
    stored = next(tr for tr in fig.data if tr.name == T.KIND_LABELS["stored"])
    headline = T.M_UTIL_VALUE.format(cont=cmp.contiguous.utilisation, paged=cmp.paged.utilisation)
    for text in stored.text:
        assert text in headline, (text, headline)


def test_block_table_columns_all_have_headers():
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    page = str(Path(__file__).resolve().parents[2] / "pages" / "paging.py")
    at = AppTest.from_file(page, default_timeout=120).run()
    assert not at.exception
    for frame in at.dataframe:
        assert all(str(c).strip() for c in frame.value.columns), list(frame.value.columns)
    metric = next(m for m in at.metric if m.label == T.M_UTIL)
    assert "%" in metric.value
