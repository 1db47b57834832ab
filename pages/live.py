"""Live engine: a real vLLM's (or the demo engine's) prefix cache through its KV-cache events. UI only:
the subscriber and the demo engine live once per server process (kvviz.fleet), shared by every session;
the forms' state is kvviz_app.live.forms, the live numbers kvviz_app.live.view."""

from __future__ import annotations

import streamlit as st

from kvviz.mirror.hashing import HASH_FUNCTIONS, NON_CRYPTO_HASHES
from kvviz_app.live import fleet as live_fleet
from kvviz_app.live import forms as S
from kvviz_app.live import view as V
from kvviz_app.live.view import K_DECODE, K_METRICS
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts

FT = texts("fleet")
T = texts("live")

ui.page_header(T.TITLE, T.INTRO)
with st.expander(T.HOW_TO_HEADER):
    st.markdown(T.HOW_TO)
if st.radio(FT.MODE, ["one", "fleet"], key="lv_mode", horizontal=True, help=FT.MODE_HELP,
            format_func=lambda m: FT.MODE_ONE if m == "one" else FT.MODE_FLEET) == "fleet":
    live_fleet.render()
    st.stop()

# ----------------------------------------------------------------------------- connect form
st.subheader(T.CONNECT_HEADER)
listening = st.radio(T.TOPOLOGY, ["connect", "listen"], key=S.K_TOPOLOGY, horizontal=True, help=T.TOPOLOGY_HELP,
                     format_func=lambda m: T.TOPOLOGY_LISTEN if m == "listen" else T.TOPOLOGY_CONNECT) == "listen"
st.caption(T.TOPOLOGY_EXPLAIN)
c = st.columns(2)
c[0].text_input(T.LISTEN_ENDPOINT if listening else T.ENDPOINT, S.DEFAULT_EP, key=S.K_EP,
                help=T.LISTEN_ENDPOINT_HELP if listening else T.ENDPOINT_HELP)
c[1].text_input(T.REPLAY, S.DEFAULT_REPLAY, key=S.K_REPLAY, help=T.REPLAY_HELP)
c = st.columns([1, 1, 3])
c[0].text_input(T.TOPIC, "", key=S.K_TOPIC, help=T.TOPIC_HELP)
c[1].number_input(T.DP_SIZE, 1, 64, 1, key=S.K_DP, help=T.DP_SIZE_HELP)
c[2].text_input(T.METRICS_URL, "", key=K_METRICS, help=T.METRICS_URL_HELP, placeholder="http://127.0.0.1:8000/metrics")
c = st.columns([1, 1, 2])
c[0].button(T.LISTEN if listening else T.CONNECT, on_click=S.connect, type="primary", width="stretch")
c[1].button(T.DISCONNECT, on_click=S.disconnect, width="stretch", disabled=not S.connected())
S.config_error(listening)
S.demo_box()
sub, config = S.subscriber()  # stops the page when not connected

st.divider()
c = st.columns([2, 3])
auto = c[0].toggle(T.AUTO_REFRESH, True, key=S.K_AUTO)
c[1].checkbox(T.TREES_DECODE, False, key=K_DECODE, help=T.TREES_DECODE_HELP)
st.fragment(V.live_numbers, run_every=2.0 if auto else None)(sub, config)

# ----------------------------------------------------------------------------- is my prompt cached?
st.divider()
st.subheader(T.PROMPT_HEADER)
st.markdown(T.PROMPT_INTRO)
ui.hash_reference()
S.use_demo_prompt(config)
st.text_area(T.PROMPT, key=S.K_PROMPT, placeholder=T.PROMPT_PLACEHOLDER, height=110)
c = st.columns([5, 4, 4])
tok = c[0].radio(T.TOKENIZER, [T.TOKENIZER_EMBEDDED, T.TOKENIZER_URL, T.TOKENIZER_IDS], key=S.K_TOK)
names = list(HASH_FUNCTIONS)
hash_name = c[1].selectbox(T.HASH, names, index=names.index("sha256"), key=S.K_HASH, help=T.HASH_HELP)
seed = c[2].text_input(T.SEED, "", key=S.K_SEED, help=T.SEED_HELP).strip() or None
if tok == T.TOKENIZER_URL:
    st.text_input(T.TOKENIZE_URL, "", key=S.K_URL, help=T.TOKENIZE_URL_HELP,
                  placeholder="http://127.0.0.1:8000/tokenize")
c = st.columns(4)
bs = c[0].number_input(T.BLOCK_SIZE, 0, 256, 0, key=S.K_BS, help=T.BLOCK_SIZE_HELP)
c[1].text_input(T.SALT, "", key=S.K_SALT, help=T.SALT_HELP)
c[2].text_input(T.LORA_NAME, "", key=S.K_LORA, help=T.LORA_HELP)
c[3].text_input(T.LORA_PATH, "", key=S.K_LORA_PATH, help=T.LORA_HELP)
if hash_name in NON_CRYPTO_HASHES and seed is None:
    st.warning(T.RANDOM_SEED_WARNING.format(hash=hash_name), icon=":material/warning:")
if st.button(T.CHECK, type="primary"):
    S.check(sub, tok, int(bs), hash_name, seed)
S.check_result(sub)
