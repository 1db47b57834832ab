"""The Edit page gives B's compute time once: the measured medians ("Measured: B on its reused blocks").
The engine's sentence above them printed B's first run as "computed 7 token(s) in 2,671 ms" right above
a measured 166.0 ms; it now names the count and points at the measured figure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvviz_app.edit import explain as E
from kvviz_app.shell.i18n import texts, use_lang


def _edit(b_ms: float) -> SimpleNamespace:
    run_a = SimpleNamespace(num_cached_tokens=0, num_computed_tokens=40, compute_ms=512.0)
    run_b = SimpleNamespace(block_ids=[3, 4, 9], num_computed_tokens=7, compute_ms=b_ms)
    return SimpleNamespace(run_a=run_a, run_b=run_b, shared_blocks=2, engine_reused_tokens=32)


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_engine_sentence_does_not_give_b_a_second_time(lang):
    with use_lang(lang):
        note = E.engine_note(_edit(2671.4))
        measured = texts("edit", lang).M_REUSE_MS
    assert "2,671" not in note and "2\u202f671" not in note and "2671" not in note, note
    assert "512" not in note, note  # nor A's single run: the times on the page are the measured medians
    assert "7" in note and "#3, #4" in note
    assert measured.split(":")[0].split()[0] in note or measured in note, note  # it points at the figure
