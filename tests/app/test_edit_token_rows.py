"""The Edit token strip says which rows it shows: its slider's numbers are the rows drawn (1-based, both
ends included), and a caption names them and how many are hidden (it drew 16 of 17 rows while the slider
read 1-17)."""

from __future__ import annotations

import pytest

from kvviz_app.edit.sections import MAX_TOKEN_ROWS, default_rows, rows_from_slider, rows_shown_line
from kvviz_app.shell.i18n import texts


@pytest.mark.parametrize(("total", "first_row"), [(17, 0), (17, 5), (17, 16), (40, 20), (17 + MAX_TOKEN_ROWS, 3)])
def test_the_sliders_numbers_are_the_rows_drawn(total, first_row):
    value = default_rows(total, first_row)
    lo, hi = rows_from_slider(value)  # 0-based, hi excluded: what the figure draws
    assert hi - lo == MAX_TOKEN_ROWS == value[1] - value[0] + 1
    assert (lo + 1, hi) == value and 1 <= value[0] <= value[1] <= total
    assert lo <= first_row < hi  # the first change is in view


def test_a_full_range_shows_every_row():
    assert rows_from_slider((1, 17)) == (0, 17)
    assert rows_from_slider((5, 5)) == (4, 5)  # one row


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_caption_names_the_rows_shown_and_hidden(lang):
    line = rows_shown_line(texts("edit", lang), 1, 17, 17, 16)
    assert "2" in line and "17" in line and "1" in line
    ru = rows_shown_line(texts("edit", "ru"), 0, 16, 17, 16)
    assert "1–16" in ru and "17" in ru and "0–255" in ru.replace("\u202f", "").replace("\xa0", ""), ru
