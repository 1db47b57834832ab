"""Plotly charts on a page, with Plotly's own texts (toolbar titles, its messages, box and violin hover
labels) in the session's language: Plotly reads them from a per-chart locale given in its config."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import streamlit as st

from kvviz_app.shell.i18n import current_lang, texts

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from streamlit.delta_generator import DeltaGenerator

T = texts("charts")


@functools.cache
def _locales(lang: str) -> dict[str, Any]:
    """Plotly's locale for ``lang``: its dictionary of Plotly's texts (built once a language; the session's
    language is ``lang`` when this is first called)."""
    return {lang: {"dictionary": dict(T.TOOLBAR)}}


def chart_config(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plotly's config for this session: ``extra`` plus, in a language other than English, that
    language's dictionary of Plotly's texts (``kvviz_app.shell.text_charts.TOOLBAR``)."""
    config = dict(extra or {})
    lang = current_lang()
    if lang != "en":
        config["locale"] = lang
        config["locales"] = _locales(lang)
    return config


def plotly_chart(fig: go.Figure, where: DeltaGenerator | None = None, **kwargs: Any) -> Any:
    """``st.plotly_chart`` (or ``where.plotly_chart``: a column, a placeholder) with ``chart_config``."""
    kwargs["config"] = chart_config(kwargs.get("config"))
    return (st if where is None else where).plotly_chart(fig, **kwargs)
