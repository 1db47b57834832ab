"""Strings shared by every page: the app title, navigation, model status, units."""

APP_TITLE = "kvviz"
APP_TAGLINE = "Why prompt caching works, and why one changed character breaks it, on a real model."

# Navigation: (page file, title, icon). app.py shows only the pages whose file exists.
PAGES: list[tuple[str, str, str]] = [
    ("pages/home.py", "Overview", ":material/home:"),
]
