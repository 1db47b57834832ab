"""docs/FIDELITY.md keeps its promise: every table row names at least one test, and every test it names
exists (a file under tests/, and each ``::name`` a test function in it; ``name*`` matches a prefix)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "FIDELITY.md"
CITE = re.compile(r"`(tests/[\w/]+\.py)((?:::[\w*\[\]-]+)?)`|`::([\w*]+)`")


def _rows() -> list[str]:
    rows = []
    for line in DOC.read_text().splitlines():
        if line.startswith("|") and not line.startswith("|---") and not line.startswith("| Rule"):
            rows.append(line)
    return rows


def _defined(path: Path, name: str) -> bool:
    text = path.read_text()
    if name.endswith("*"):
        return re.search(rf"^def {re.escape(name[:-1])}\w*\(", text, re.M) is not None
    return re.search(rf"^def {re.escape(name)}\(", text, re.M) is not None


def test_every_row_points_to_an_existing_test() -> None:
    rows = _rows()
    assert len(rows) >= 20
    for row in rows:
        test_cell = row.rstrip("|").rsplit("|", 1)[-1]
        cited = 0
        current: Path | None = None
        for m in CITE.finditer(test_cell):
            if m.group(1):
                current = ROOT / m.group(1)
                assert current.is_file(), f"{m.group(1)} does not exist (row: {row[:60]})"
                name = m.group(2)[2:]
            else:
                assert current is not None, row[:60]
                name = m.group(3)
            if name:
                assert _defined(current, name), f"{current.name}::{name} is not a test (row: {row[:60]})"
            cited += 1
        assert cited, f"row without a test: {row[:80]}"


def test_release_matches_the_library_constant() -> None:
    from kvviz.mirror.hashing import REFERENCE_RELEASE

    assert f"**{REFERENCE_RELEASE}**" in DOC.read_text()
