"""Landing page: what kvviz teaches, the live model card, a real prefill on your text, the pages."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitAPIException

from kvviz.model.settings import InputError, max_tokens_default
from kvviz.util.units import format_bytes
from kvviz_app.shell import ui, ui_present, ui_share
from kvviz_app.shell.i18n import texts

C = texts("common")
T = texts("home")

ROOT = Path(__file__).resolve().parents[1]  # the repo root: page paths are relative to app.py
_RESULT_KEY = "home_prefill_result"
LANDING_CHAIN_ROWS = 9  # the head, the change and the tail: short enough for the first screen below the text



@st.cache_data(show_spinner=False)
def _default_edit():
    """The Edit page's default preset, hashed (no forward pass): its tokens and its two block chains."""
    from kvviz.analysis.prompt_compare import compare_prompts
    from kvviz.experiments.edit.presets import DEFAULT_PRESET_ID, load_edit_presets
    from kvviz.model import tokenize

    preset = {p.id: p for p in load_edit_presets()}[DEFAULT_PRESET_ID]
    return compare_prompts(tokenize(preset.a).ids, tokenize(preset.b).ids, block_size=preset.block_size)


def _landing_chain() -> None:
    """The lesson in one picture: the Edit page's first example as two block chains (rows left out in the
    middle are one gap row), with the numbers the chart shows."""
    from kvviz_app.edit.figures_chain import chain_figure

    cmp = _default_edit()
    ui_present.chart(chain_figure(cmp, max_rows=LANDING_CHAIN_ROWS), width="stretch", key="home_chain_chart",
                     config={"displayModeBar": False})
    st.caption(T.PICTURE_CAPTION.format(tokens=cmp.num_tokens_b, blocks=len(cmp.blocks), size=cmp.block_size,
                                        reused=cmp.reused_blocks, first=cmp.first_changed_token))


ui.page_header(T.TITLE, T.INTRO)
ui_present.start_here()
if ui_share.presenting():
    ui_present.join_panel()
ui_present.paths_panel()

st.subheader(T.TEACHES_HEADER)
st.markdown("\n".join(f"- {line}" for line in T.TEACHES))

st.subheader(T.PICTURE_HEADER)
_landing_chain()

st.subheader(T.CARD_HEADER)
st.markdown(T.CARD_INTRO)
lm = ui.get_model()
ui.render_model_card(lm)

st.subheader(T.TRY_HEADER)
st.markdown(T.TRY_INTRO.format(limit=max_tokens_default()))
with st.form("home_prefill"):
    text = st.text_area(T.TRY_LABEL, value=T.TRY_DEFAULT, height=110)
    run = st.form_submit_button(T.TRY_BUTTON, type="primary")
if run:
    from kvviz.engine.prefill import prefill
    from kvviz.experiments.edit.diffs import piece_text

    try:
        with st.spinner(T.TRY_RUNNING):
            result = prefill(lm, text=text)
        st.session_state[_RESULT_KEY] = {
            "model": lm.info.model_id,
            "tokens": result.num_tokens,
            "bytes": result.kv_bytes_measured,
            "per_token": result.kv_bytes_per_token,
            "ms": result.prefill_ms,
            "next": piece_text(lm, int(result.last_logits.argmax())),  # <0xD0> for a partial byte, as on Edit
            "pieces": result.pieces,
            "notice": result.notice,
        }
    except InputError as exc:
        st.session_state.pop(_RESULT_KEY, None)
        ui.show_error(exc)
shown = st.session_state.get(_RESULT_KEY)
if shown and shown["model"] == lm.info.model_id:
    if shown["notice"]:
        st.warning(C.notice(shown["notice"]), icon=":material/content_cut:")
    cols = st.columns(4)
    cols[0].metric(T.TRY_TOKENS, ui.loc(f"{shown['tokens']:,}"))
    cols[1].metric(T.TRY_KV, ui.loc(format_bytes(shown["bytes"])), help=T.TRY_KV_HELP.format(
        bytes=shown["bytes"], per_token=shown["per_token"], tokens=shown["tokens"], layers=lm.info.num_layers))
    cols[2].metric(T.TRY_TIME, T.MS_VALUE.format(ms=shown["ms"]))
    cols[3].metric(T.TRY_NEXT, repr(shown["next"]))
    st.caption(T.TRY_SCALE.format(per_1k=ui.loc(format_bytes(shown["per_token"] * 1000)),
                                  per_100k=ui.loc(format_bytes(shown["per_token"] * 100_000))))
    st.caption(T.TRY_TOKENS_CAPTION)
    st.markdown(ui.token_chips_html(shown["pieces"]), unsafe_allow_html=True)

others = [(path, title, icon) for path, title, icon in C.PAGES if path != "pages/home.py" and (ROOT / path).exists()]
if others:
    st.subheader(T.PAGES_HEADER)
    st.caption(T.PAGES_INTRO)
    columns = st.columns(3)
    for i, (path, title, icon) in enumerate(others):
        blurb = C.PAGE_BLURBS.get(path, "")
        with columns[i % 3]:
            try:
                st.page_link(path, label=title, icon=icon)
                if blurb:
                    st.caption(blurb)
            except StreamlitAPIException:  # run alone (no navigation): plain text instead
                st.markdown(f"**{title}**" + (f": {blurb}" if blurb else ""))
ui_present.next_link("pages/home.py")
