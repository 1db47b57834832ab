"""The block-table page's pool grid: rows are as even as the width allows (no lone block on a last row)."""

from __future__ import annotations

import pytest

from kvviz_app.block_table.figures import pool_columns


@pytest.mark.parametrize("n", range(1, 65))
def test_small_pools_fill_their_last_row_as_far_as_seven_to_nine_columns_allow(n):
    cols = pool_columns(n)
    assert 7 <= cols <= 9
    rows = -(-n // cols)
    best_rows = min(-(-n // c) for c in (7, 8, 9))
    assert rows == best_rows
    if n > 9:  # the last row is never a lone block when another width avoids it
        last = n - (rows - 1) * cols
        assert last >= min(n - (best_rows - 1) * c for c in (7, 8, 9) if -(-n // c) == best_rows)


def test_the_default_scenario_pool_has_no_lone_block():
    assert pool_columns(25) == 9  # 9 + 9 + 7, where 8 columns left block 24 alone on a fourth row
    assert pool_columns(65) == 16
