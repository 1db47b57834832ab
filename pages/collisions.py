"""Hash collisions: why the block identity is SHA-256 over canonical CBOR, what NONE_HASH and the seed do,
what a (forced) collision serves, and each hash function's measured cost. UI only: every number comes
from kvviz.experiments.security.collisions and kvviz.experiments.security.collision_leak; the sections are
kvviz_app.collisions.view."""

from __future__ import annotations

from kvviz_app.collisions import view as V
from kvviz_app.shell import ui, ui_present
from kvviz_app.shell.i18n import texts

T = texts("collisions")

ui.page_header(T.COL_TITLE, T.COL_INTRO)
lm = ui.get_model()

V.python_hash()
V.none_hash(lm)
collision = V.forced_inputs(lm)
if collision is not None:
    V.forced_result(lm, collision)
V.costs()
ui_present.next_link("pages/collisions.py")
