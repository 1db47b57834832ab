"""The route table: every page script exists, and a missing one stops the app at start-up."""

from __future__ import annotations

import pytest

from kvviz_app import navigation


def test_every_route_names_a_page_script():
    table = navigation.routes()
    assert len(table) == 15
    assert all((navigation.ROOT / path).is_file() for path, _title, _icon in table)
    assert all(path.startswith("kvviz_app/page_scripts/") for path, _title, _icon in table)


def test_a_missing_page_script_is_a_start_up_error(monkeypatch):
    gone = ("kvviz_app/page_scripts/no_such_page.py", "Gone", ":material/help:")
    monkeypatch.setattr(navigation.T.module, "PAGES", [*navigation.T.module.PAGES, gone])
    with pytest.raises(navigation.MissingPageError, match="no_such_page.py"):
        navigation.routes()
