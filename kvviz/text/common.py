"""Strings shared by every page: the app title, navigation, model status, units."""

APP_TITLE = "kvviz"
APP_TAGLINE = "Why prompt caching works, and why one changed character breaks it, on a real model."

# Navigation: (page file, title, icon). app.py shows only the pages whose file exists.
PAGES: list[tuple[str, str, str]] = [
    ("pages/home.py", "Overview", ":material/home:"),
]

# Input limits and errors raised by kvviz.model (shown in the UI and on the CLI).
ERROR_EMPTY_TEXT = "The text is empty: type or paste at least one visible character."
ERROR_NO_TOKENS = "The input produced no tokens: give at least one token."
TRUNCATION_NOTICE = (
    "The input has {total} tokens; only the first {kept:,} are used (the limit is {limit:,} tokens)."
)
