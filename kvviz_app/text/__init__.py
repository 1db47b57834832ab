"""Every user-facing string of the app, one module per page, in English (the catalogs' msgids).

A module holds plain values: read it through ``kvviz_app.i18n.texts(name)`` (the calling session's
language) or ``texts(name, lang)``, which returns each value from locale/<lang>/LC_MESSAGES/kvviz.po.
A helper here that composes text takes that view as its first argument (``t``) and reads its words
from it, so a Russian view composes Russian. Data that is not UI text (prompts, links, colours) lives
with its feature, never here: every public value of these modules is translated.
"""
