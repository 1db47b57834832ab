"""Live engine: a real vLLM's (or the demo engine's) prefix cache through its KV-cache events. UI only:
the subscriber and the demo engine live once per server process (kvviz.fleet), shared by every session."""

from __future__ import annotations

import streamlit as st

from kvviz.fleet import demo as D
from kvviz.fleet.engine_http import tokenize_remote
from kvviz.fleet.engine_model import hash_label
from kvviz.fleet.subscriber import LiveConfig, check_prompt, read_view, shared
from kvviz.mirror.hashing import HASH_FUNCTIONS, NON_CRYPTO_HASHES
from kvviz_app.live import figures as F
from kvviz_app.live import fleet as live_fleet
from kvviz_app.live import view as V
from kvviz_app.live.view import K_DECODE, K_METRICS
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts

FT = texts("fleet")
T = texts("live")

K_CFG, K_EP, K_REPLAY, K_TOPIC, K_DP = "lv_config", "lv_ep", "lv_replay", "lv_topic", "lv_dp"
K_TOPOLOGY = "lv_topology"  # "connect": kvviz connects to the engine; "listen": the engine connects to kvviz
K_AUTO, K_PROMPT, K_TOK, K_URL, K_HASH, K_SEED, K_BS = (
    "lv_auto", "lv_prompt", "lv_tok", "lv_url", "lv_hash", "lv_seed", "lv_bs")
K_RESULT, K_SALT, K_LORA, K_LORA_PATH = "lv_result", "lv_salt", "lv_lora", "lv_lora_path"
DEFAULT_EP, DEFAULT_REPLAY = "tcp://127.0.0.1:5557", "tcp://127.0.0.1:5558"


def _embedded_tokenize(text: str) -> list[int]:
    from kvviz.model import tokenize  # imports torch: only when a tokenizer is needed

    return list(tokenize(text).ids)



def _listening() -> bool:
    return st.session_state.get(K_TOPOLOGY) == "listen"


def _form_config() -> LiveConfig:
    return LiveConfig(st.session_state.get(K_EP, DEFAULT_EP), st.session_state.get(K_REPLAY) or None,
                      st.session_state.get(K_TOPIC, ""), int(st.session_state.get(K_DP, 1)),
                      listen=_listening()).validated()


def _start_demo() -> None:
    try:
        cfg = _form_config()
        if not all(e.startswith("tcp://127.0.0.1:") for e in (cfg.endpoint, cfg.replay_endpoint) if e):
            raise ValueError(T.DEMO_NOT_LOCAL)
        D.shared_demo(cfg.endpoint, cfg.replay_endpoint, tokenize=_embedded_tokenize, connect=cfg.listen)
        st.session_state[K_CFG] = cfg
    except ValueError as exc:
        st.session_state["lv_demo_error"] = str(exc)


def _connect() -> None:
    try:
        st.session_state[K_CFG] = _form_config()
        st.session_state.pop("lv_config_error", None)
    except ValueError as exc:
        st.session_state["lv_config_error"] = ui.error_text(exc)


def _disconnect() -> None:
    st.session_state.pop(K_CFG, None)


ui.page_header(T.TITLE, T.INTRO)
with st.expander(T.HOW_TO_HEADER):
    st.markdown(T.HOW_TO)
if st.radio(FT.MODE, ["one", "fleet"], key="lv_mode", horizontal=True, help=FT.MODE_HELP,
            format_func=lambda m: FT.MODE_ONE if m == "one" else FT.MODE_FLEET) == "fleet":
    live_fleet.render()
    st.stop()

# ----------------------------------------------------------------------------- connect form
st.subheader(T.CONNECT_HEADER)
listening = st.radio(T.TOPOLOGY, ["connect", "listen"], key=K_TOPOLOGY, horizontal=True, help=T.TOPOLOGY_HELP,
                     format_func=lambda m: T.TOPOLOGY_LISTEN if m == "listen" else T.TOPOLOGY_CONNECT) == "listen"
st.caption(T.TOPOLOGY_EXPLAIN)
c = st.columns(2)
c[0].text_input(T.LISTEN_ENDPOINT if listening else T.ENDPOINT, DEFAULT_EP, key=K_EP,
                help=T.LISTEN_ENDPOINT_HELP if listening else T.ENDPOINT_HELP)
c[1].text_input(T.REPLAY, DEFAULT_REPLAY, key=K_REPLAY, help=T.REPLAY_HELP)
c = st.columns([1, 1, 3])
c[0].text_input(T.TOPIC, "", key=K_TOPIC, help=T.TOPIC_HELP)
c[1].number_input(T.DP_SIZE, 1, 64, 1, key=K_DP, help=T.DP_SIZE_HELP)
c[2].text_input(T.METRICS_URL, "", key=K_METRICS, help=T.METRICS_URL_HELP, placeholder="http://127.0.0.1:8000/metrics")
c = st.columns([1, 1, 2])
c[0].button(T.LISTEN if listening else T.CONNECT, on_click=_connect, type="primary", width="stretch")
c[1].button(T.DISCONNECT, on_click=_disconnect, width="stretch", disabled=K_CFG not in st.session_state)
if "lv_config_error" in st.session_state:
    st.error((T.BAD_LISTEN if listening else T.BAD_CONFIG).format(error=st.session_state["lv_config_error"]),
             icon=":material/error:")

with st.container(border=True):
    st.markdown(f"**{T.DEMO_HEADER}**")
    ep, replay = st.session_state.get(K_EP, DEFAULT_EP), st.session_state.get(K_REPLAY) or None
    demo = D.running_demo(ep)
    if demo is not None:
        st.success(T.DEMO_RUNNING.format(endpoint=ep), icon=":material/play_circle:")
    else:
        st.caption(T.DEMO_TEXT.format(blocks=D.DEMO_NUM_BLOCKS, bs=D.DEMO_BLOCK_SIZE, hash=D.DEFAULT_HASH,
                                      users=D.DEMO_USERS, endpoint=ep, replay=replay or "-"))
        st.button(T.DEMO_START, on_click=_start_demo, icon=":material/play_arrow:")
    if err := st.session_state.pop("lv_demo_error", None):
        st.error(T.DEMO_FAILED.format(error=err), icon=":material/error:")

config: LiveConfig | None = st.session_state.get(K_CFG)
if config is None:
    st.info(T.NOT_CONNECTED, icon=":material/info:")
    st.stop()
try:
    sub = shared(config)
except ValueError as exc:
    ui.show_error(exc, (T.BAD_LISTEN if config.listen else T.BAD_CONFIG).split(":")[0])
    st.stop()




st.divider()
c = st.columns([2, 3])
auto = c[0].toggle(T.AUTO_REFRESH, True, key=K_AUTO)
c[1].checkbox(T.TREES_DECODE, False, key=K_DECODE, help=T.TREES_DECODE_HELP)
st.fragment(V.live_numbers, run_every=2.0 if auto else None)(sub, config)

# ----------------------------------------------------------------------------- is my prompt cached?
st.divider()
st.subheader(T.PROMPT_HEADER)
st.markdown(T.PROMPT_INTRO)
ui.hash_reference()
if D.running_demo(config.endpoint) is not None and st.button(T.USE_DEMO_PROMPT):
    st.session_state[K_PROMPT] = D.SYSTEM_PROMPTS[0]
st.text_area(T.PROMPT, key=K_PROMPT, placeholder=T.PROMPT_PLACEHOLDER, height=110)
c = st.columns([5, 4, 4])
tok = c[0].radio(T.TOKENIZER, [T.TOKENIZER_EMBEDDED, T.TOKENIZER_URL, T.TOKENIZER_IDS], key=K_TOK)
names = list(HASH_FUNCTIONS)
hash_name = c[1].selectbox(T.HASH, names, index=names.index("sha256"), key=K_HASH, help=T.HASH_HELP)
seed = c[2].text_input(T.SEED, "", key=K_SEED, help=T.SEED_HELP).strip() or None
if tok == T.TOKENIZER_URL:
    st.text_input(T.TOKENIZE_URL, "", key=K_URL, help=T.TOKENIZE_URL_HELP, placeholder="http://127.0.0.1:8000/tokenize")
c = st.columns(4)
bs = c[0].number_input(T.BLOCK_SIZE, 0, 256, 0, key=K_BS, help=T.BLOCK_SIZE_HELP)
c[1].text_input(T.SALT, "", key=K_SALT, help=T.SALT_HELP)
c[2].text_input(T.LORA_NAME, "", key=K_LORA, help=T.LORA_HELP)
c[3].text_input(T.LORA_PATH, "", key=K_LORA_PATH, help=T.LORA_HELP)
if hash_name in NON_CRYPTO_HASHES and seed is None:
    st.warning(T.RANDOM_SEED_WARNING.format(hash=hash_name), icon=":material/warning:")


def _prompt_tokens(text: str) -> list[int]:
    if tok == T.TOKENIZER_IDS:
        from kvviz.cli.hash import parse_token_list

        return parse_token_list(text, T.TOKENIZER_IDS)
    if tok == T.TOKENIZER_URL:
        return tokenize_remote(st.session_state.get(K_URL, ""), text)
    return _embedded_tokenize(text)


if st.button(T.CHECK, type="primary"):
    text = st.session_state.get(K_PROMPT, "")
    if not text.strip():
        st.session_state[K_RESULT] = ("error", T.CHECK_EMPTY)
    elif bool((st.session_state.get(K_LORA) or "").strip()) != bool((st.session_state.get(K_LORA_PATH) or "").strip()):
        st.session_state[K_RESULT] = ("error", T.LORA_BOTH)
    else:
        try:
            tokens = _prompt_tokens(text)
            keys = {"cache_salt": st.session_state.get(K_SALT) or None,
                    "lora_name": (st.session_state.get(K_LORA) or "").strip() or None,
                    "lora_path": (st.session_state.get(K_LORA_PATH) or "").strip() or None}
            st.session_state[K_RESULT] = ("ok", check_prompt(sub, tokens, int(bs) or None, hash_name, seed, **keys))
        except Exception as exc:  # noqa: BLE001 - tokenizer, URL and token-list errors all become one line
            st.session_state[K_RESULT] = ("error", T.CHECK_ERROR.format(error=str(exc).splitlines()[0][:300]))

result = st.session_state.get(K_RESULT)
if result and result[0] == "error":
    st.error(result[1], icon=":material/error:")
elif result:
    status = result[1]
    if not status.blocks:
        st.warning(T.TOO_SHORT.format(tokens=status.num_tokens, bs=status.block_size), icon=":material/warning:")
    else:
        if not read_view(sub, 0).summary["batches"]:
            st.caption(T.PROMPT_NO_ENGINE_DATA)
        st.markdown((T.PROMPT_RESULT if status.complete else T.PROMPT_RESULT_PARTIAL).format(
            cached=sum(status.cached), blocks=status.blocks, run=status.cached_run, unknown=status.unknown,
            tokens=status.cached_run * status.block_size, total=status.num_tokens))
        hover = [T.PROMPT_HOVER.format(i=i, start=i * status.block_size, end=(i + 1) * status.block_size - 1,
                                       hash=hash_label(h, 16)) for i, h in enumerate(status.hashes)]
        ui_chart.plotly_chart(F.prompt_blocks_figure(status.cached, status.cached_run, status.block_size, T.PROMPT_TITLE,
                                                     T.PROMPT_LABELS, hover, complete=status.complete), width="stretch", key="lv_prompt_fig")
        if isinstance(status.hashes[0], int):
            st.caption(T.HASH_KIND_NOTE)
