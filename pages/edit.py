"""Edit one character: the block-hash cascade an edit causes, and its proof on the real K/V tensors.
The inputs, the page's session state and the cached runs are kvviz_app.edit.view; the sections below
the inputs are kvviz_app.edit.sections."""

from __future__ import annotations

import streamlit as st

from kvviz_app.edit import sections as S
from kvviz_app.edit import view as V
from kvviz_app.shell import ui, ui_present, ui_share
from kvviz_app.shell.i18n import texts

T = texts("edit")

ui.page_header(T.TITLE, T.INTRO)
lm = ui.get_model()

V.init_state()
SHARE = V.share_schema()
ui_share.restore("edit", SHARE)
PICTURE = ui_present.key_slot()  # presenter mode: the hash chains first
V.apply_token_click(lm)

text_a, text_b = V.inputs()
V.prompts(text_a, text_b)
settings = V.settings()
ui_share.sync("edit", SHARE)
V.stop_if_blank(text_a, text_b)
inputs, plan = V.plan_or_stop(lm, text_a, text_b, settings)
if not ui_present.predict_edit(plan.comparison, plan.char_edit.start, plan.num_tokens_b,
                               (text_a, text_b, int(settings.block_size))):
    st.stop()  # the learner predicts first; the answers are below the Reveal button

# drawn from hashing alone, before any engine request; the engine's counts fill the slot above the chains
S.change(plan, text_a, text_b, V.new_click)
S.tokenizer_note(text_a, lm.source.key)
reuse_slot = st.container()
S.chains(plan, PICTURE)
edit = V.run_or_stop(lm, inputs, plan, reuse_slot)
with reuse_slot:
    saved_slot, timing_slot = S.reuse_counts(edit)
# timed after the charts and the engine's counts are out: each timed run is an engine request of its own
with timing_slot, st.spinner(T.TIMING_RUNNING):
    timing = V.timing(lm, inputs, edit)
S.timing(edit, saved_slot, timing_slot, timing)
with st.spinner(T.PROOF_RUNNING):
    proof = V.proof(lm, inputs, edit, timing)
S.proof(edit, proof)
S.engine(edit)
ui_present.next_link("pages/edit.py", ui_share.current_params(SHARE))
