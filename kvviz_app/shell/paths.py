"""Guided paths through the pages: an ordered list of steps, each a page, the settings it opens with
(shareable-link params) and the id of one question to ask. Data only; the questions live in kvviz_app.text."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Step:
    """One step of a path: ``page`` (a script under pages/), link ``params``, ``minutes``, ``question`` id."""

    page: str
    question: str
    minutes: int
    params: dict[str, str] = field(default_factory=dict)


#: Path id -> steps. The workshop adds up to 45 minutes; self-study also turns predictions on.
PATHS: dict[str, tuple[Step, ...]] = {
    "workshop": (
        Step("pages/home.py", "home", 3),
        Step("pages/edit.py", "edit", 8, {"mode": "preset", "preset": "cat_tail"}),
        Step("pages/calculator.py", "calculator", 6, {"mode": "preset", "preset": "llama-2-7b", "tokens": "1000",
                                                      "batch": "100"}),
        Step("pages/paging.py", "paging", 5),
        Step("pages/block_table.py", "block_table", 7, {"scenario": "pool_pressure"}),
        Step("pages/radix.py", "radix", 4),
        Step("pages/sessions.py", "sessions", 5),
        Step("pages/room.py", "room", 5),
        Step("pages/side_channel.py", "side_channel", 2),
    ),
    "self": (
        Step("pages/home.py", "home", 5),
        Step("pages/edit.py", "edit", 10, {"mode": "preset", "preset": "cat_tail"}),
        Step("pages/calculator.py", "calculator", 8, {"mode": "preset", "preset": "llama-2-7b"}),
        Step("pages/calculator.py", "calculator_gqa", 4, {"mode": "preset", "preset": "llama-3-8b"}),
        Step("pages/paging.py", "paging", 8),
        Step("pages/block_table.py", "block_table", 10, {"scenario": "pool_pressure"}),
        Step("pages/radix.py", "radix", 6),
        Step("pages/sessions.py", "sessions", 8),
        Step("pages/room.py", "room", 5),
        Step("pages/side_channel.py", "side_channel", 6),
        Step("pages/collisions.py", "collisions", 6),
    ),
}


def step_index(path: str, page: str, params: dict[str, str] | None = None) -> int | None:
    """Index of the step on ``page`` in ``path``: the one whose params all match ``params`` (the page's
    current link), else the page's first step; None when the page is not on the path."""
    steps = PATHS.get(path, ())
    on_page = [i for i, s in enumerate(steps) if s.page == page]
    if not on_page:
        return None
    given = params or {}
    for i in reversed(on_page):
        if steps[i].params and all(given.get(k) == v for k, v in steps[i].params.items()):
            return i
    return on_page[0]


def total_minutes(path: str) -> int:
    return sum(s.minutes for s in PATHS.get(path, ()))
