"""Multi-turn sessions and agents: per-turn cache reads and writes on real token counts, provider
policies, events to try, quadratic vs linear prefill work. UI only: numbers come from
kvviz.experiments.sessions (which runs the real block manager and tokenizer); the sections and the
page's session state are kvviz_app.sessions.view."""

from __future__ import annotations

from kvviz.experiments.sessions import example_names
from kvviz_app.sessions import view as V
from kvviz_app.sessions.chat import render_chat
from kvviz_app.shell import ui, ui_present, ui_schemas, ui_share
from kvviz_app.shell.i18n import texts

T = texts("sessions")

ui.page_header(T.TITLE, T.INTRO)

examples = example_names()
SHARE = ui_schemas.sessions(examples)
ui_share.restore("sessions", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: the turn-by-turn picture first
V.set_defaults()
choice = V.choose(examples)
events = V.events(choice.session)
result = V.run(choice, events)

projection = V.projection(result)
V.headline(result, events, projection)
V.picture(result, PICTURE)
V.usage(result)
V.work(result, projection)
V.policy_values(choice.policy)
render_chat()
ui_share.sync("sessions", SHARE)
ui_present.next_link("pages/sessions.py", ui_share.current_params(SHARE))
