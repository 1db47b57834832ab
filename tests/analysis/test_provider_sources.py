"""Provider policy lines cite public, dated documentation pages, not files a user does not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvviz.analysis.providers import AS_OF, POLICIES, SOURCE_NAMES
from kvviz_app.shell.i18n import texts

T = texts("sessions")

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(r"seed article|seeds/|BRIEF|§")


@pytest.mark.parametrize("key", list(POLICIES))
def test_every_policy_value_cites_a_public_page(key):
    policy = POLICIES[key]
    for value in policy.values:
        assert not INTERNAL.search(value.source), value
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", value.as_of)
    for source in policy.sources_used:
        assert source in SOURCE_NAMES, source
        assert SOURCE_NAMES[source].startswith("https://"), SOURCE_NAMES[source]


def test_no_ui_string_refers_to_internal_files():
    for path in sorted((ROOT / "kvviz" / "text").glob("*.py")) + sorted((ROOT / "pages").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        strings = re.findall(r'"([^"\n]*)"', text)
        bad = [s for s in strings if INTERNAL.search(s)]
        assert not bad, (path.name, bad[:3])


def test_sources_are_dated():
    assert re.fullmatch(r"\d{4}-\d{2}", AS_OF)
    assert "{as_of}" in T.POLICY_LINE
