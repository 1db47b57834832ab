"""The route table: every page script exists, and a missing one stops the app at start-up."""

from __future__ import annotations

import pytest

from kvviz_app.shell import routes


def test_every_route_names_a_page_script():
    table = routes.routes()
    assert len(table) == 15
    assert all((routes.ROOT / path).is_file() for path, _title, _icon in table)
    assert all(path.startswith("pages/") for path, _title, _icon in table)


def test_a_missing_page_script_is_a_start_up_error(monkeypatch):
    gone = ("pages/no_such_page.py", "Gone", ":material/help:")
    monkeypatch.setattr(routes.T.module, "PAGES", [*routes.T.module.PAGES, gone])
    with pytest.raises(routes.MissingPageError, match="no_such_page.py"):
        routes.routes()


def test_every_page_but_the_landing_page_has_a_blurb_in_the_page_list():
    """The landing page lists the pages with one line each; the glossary once had none."""
    from kvviz_app.shell.i18n import texts

    for lang in ("en", "ru"):
        c = texts("common", lang)
        pages = {path for path, _title, _icon in c.PAGES} - {"pages/home.py"}
        assert pages == set(c.PAGE_BLURBS), (lang, pages ^ set(c.PAGE_BLURBS))
        assert all(blurb.strip() for blurb in c.PAGE_BLURBS.values())
