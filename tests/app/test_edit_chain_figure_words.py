"""The hash-chain figure's gap row ("… 12 more blocks: 12 hit …") names the blocks' statuses in the
session's language, as its legend does (the Russian landing page and Edit page showed the English 'hit')."""

from __future__ import annotations

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz_app.edit.figures_chain import chain_figure
from kvviz_app.shell.i18n import texts, use_lang


def _gap_text(lang: str) -> str:
    a = list(range(1, 400))
    b = a[:300] + [9999] + a[301:]  # one token changed in block 18 of 25: the head and the middle are gaps
    with use_lang(lang):
        fig = chain_figure(compare_prompts(a, b, block_size=16), max_rows=9)
    texts_on_chart = [str(t) for trace in fig.data for t in (trace.text or ()) if t and "…" in str(t)]
    texts_on_chart += [a.text for a in fig.layout.annotations if "…" in (a.text or "")]
    assert texts_on_chart, "the figure has no gap row"
    return " ".join(texts_on_chart)


def test_the_gap_row_names_statuses_in_russian():
    ru = texts("edit", "ru")
    gap = _gap_text("ru")
    assert f'{ru.STATUS_LABELS["hit"]}: 15' in gap and "hit" not in gap, gap


def test_the_gap_row_in_english_counts_each_status():
    gap = _gap_text("en")
    assert "hit: 15" in gap and "invalidated: 4" in gap, gap


def test_the_presenter_key_picture_keeps_its_rows_unsqueezed():
    """In presenter mode the chain is the key picture, capped at KEY_PICTURE_MAX_HEIGHT: a 17-block chain
    drawn with every row was squeezed to 14 px a row (its headers on the first row); it draws as many rows
    as fit, 30 px each."""
    from kvviz_app.edit.figures_chain import FIXED_PX, ROW_PX, rows_fitting
    from kvviz_app.shell.ui_present import KEY_PICTURE_MAX_HEIGHT

    a = list(range(1, 272))
    b = a[:250] + [9999] + a[251:]  # 17 blocks of 16, the edit in block 15
    rows = rows_fitting(KEY_PICTURE_MAX_HEIGHT)
    fig = chain_figure(compare_prompts(a, b, block_size=16), max_rows=rows)
    drawn = -fig.layout.yaxis.range[0] + 0.4  # the y axis spans the drawn rows
    assert fig.layout.height <= KEY_PICTURE_MAX_HEIGHT
    assert drawn <= rows and (fig.layout.height - FIXED_PX) / drawn >= ROW_PX - 0.5
