"""The null-block rule lives in one place: kvviz.mirror.events.usable_blocks, used by the pool and the pages."""

from __future__ import annotations

import re
from pathlib import Path

from kvviz.mirror.block_pool import BlockPool
from kvviz.mirror.events import usable_blocks

ROOT = Path(__file__).resolve().parents[2]


def test_the_pool_and_the_rule_agree():
    for n in (2, 5, 64):
        pool = BlockPool(n)
        assert pool.num_usable_blocks == usable_blocks(n) == n - 1 == pool.get_num_free_blocks()


def test_no_page_recomputes_the_null_block():
    pattern = re.compile(r"num_blocks\s*-\s*1\b")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "kvviz_app").rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []
