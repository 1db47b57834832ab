"""The Live engine page's forms (pages/live.py): the connect form's state and callbacks, the demo engine's box,
the shared subscriber of the session's config, and "is my prompt cached?" (its check and its answer). The
subscriber and the demo engine live once per server process (kvviz.fleet); a session keeps only its config."""

from __future__ import annotations

import streamlit as st

from kvviz.fleet import demo as D
from kvviz.fleet.engine_http import tokenize_remote
from kvviz.fleet.engine_model import hash_label
from kvviz.fleet.subscriber import LiveConfig, check_prompt, read_view, shared
from kvviz_app.live import figures as F
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import texts

T = texts("live")

K_CFG, K_EP, K_REPLAY, K_TOPIC, K_DP = "lv_config", "lv_ep", "lv_replay", "lv_topic", "lv_dp"
K_TOPOLOGY = "lv_topology"  # "connect": kvviz connects to the engine; "listen": the engine connects to kvviz
K_AUTO, K_PROMPT, K_TOK, K_URL, K_HASH, K_SEED, K_BS = (
    "lv_auto", "lv_prompt", "lv_tok", "lv_url", "lv_hash", "lv_seed", "lv_bs")
K_RESULT, K_SALT, K_LORA, K_LORA_PATH = "lv_result", "lv_salt", "lv_lora", "lv_lora_path"
K_CONFIG_ERROR, K_DEMO_ERROR = "lv_config_error", "lv_demo_error"
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


def start_demo() -> None:
    """The demo button's callback: the demo engine on the form's (loopback) endpoints, and this session on it."""
    try:
        cfg = _form_config()
        if not all(e.startswith("tcp://127.0.0.1:") for e in (cfg.endpoint, cfg.replay_endpoint) if e):
            raise ValueError(T.DEMO_NOT_LOCAL)
        D.shared_demo(cfg.endpoint, cfg.replay_endpoint, tokenize=_embedded_tokenize, connect=cfg.listen)
        st.session_state[K_CFG] = cfg
    except ValueError as exc:
        st.session_state[K_DEMO_ERROR] = str(exc)


def connect() -> None:
    """The connect (listen) button's callback: the form's config, or the reason it is refused."""
    try:
        st.session_state[K_CFG] = _form_config()
        st.session_state.pop(K_CONFIG_ERROR, None)
    except ValueError as exc:
        st.session_state[K_CONFIG_ERROR] = ui.error_text(exc)


def disconnect() -> None:
    st.session_state.pop(K_CFG, None)


def connected() -> bool:
    return K_CFG in st.session_state


def config_error(listening: bool) -> None:
    """The last refused config's reason, under the form."""
    if K_CONFIG_ERROR in st.session_state:
        st.error((T.BAD_LISTEN if listening else T.BAD_CONFIG).format(error=st.session_state[K_CONFIG_ERROR]),
                 icon=":material/error:")


def demo_box() -> None:
    """The demo engine's box: running on the form's endpoint, or what it is and the button that starts it."""
    with st.container(border=True):
        st.markdown(f"**{T.DEMO_HEADER}**")
        ep, replay = st.session_state.get(K_EP, DEFAULT_EP), st.session_state.get(K_REPLAY) or None
        demo = D.running_demo(ep)
        if demo is not None:
            st.success(T.DEMO_RUNNING.format(endpoint=ep), icon=":material/play_circle:")
        else:
            st.caption(T.DEMO_TEXT.format(blocks=D.DEMO_NUM_BLOCKS, bs=D.DEMO_BLOCK_SIZE, hash=D.DEFAULT_HASH,
                                          users=D.DEMO_USERS, endpoint=ep, replay=replay or "-"))
            st.button(T.DEMO_START, on_click=start_demo, icon=":material/play_arrow:")
        if err := st.session_state.pop(K_DEMO_ERROR, None):
            st.error(T.DEMO_FAILED.format(error=err), icon=":material/error:")


def subscriber() -> tuple:
    """(the shared subscriber, the session's config); without a config, or with one refused, the page stops here."""
    config: LiveConfig | None = st.session_state.get(K_CFG)
    if config is None:
        st.info(T.NOT_CONNECTED, icon=":material/info:")
        st.stop()
    try:
        return shared(config), config
    except ValueError as exc:
        ui.show_error(exc, (T.BAD_LISTEN if config.listen else T.BAD_CONFIG).split(":")[0])
        st.stop()


def use_demo_prompt(config: LiveConfig) -> None:
    """With the demo engine publishing, a button that puts its first system prompt into the prompt box."""
    if D.running_demo(config.endpoint) is not None and st.button(T.USE_DEMO_PROMPT):
        st.session_state[K_PROMPT] = D.SYSTEM_PROMPTS[0]


def _prompt_tokens(tok: str, text: str) -> list[int]:
    if tok == T.TOKENIZER_IDS:
        from kvviz.cli.hash import parse_token_list

        return parse_token_list(text, T.TOKENIZER_IDS)
    if tok == T.TOKENIZER_URL:
        return tokenize_remote(st.session_state.get(K_URL, ""), text)
    return _embedded_tokenize(text)


def check(sub, tok: str, bs: int, hash_name: str, seed: str | None) -> None:
    """The check button: the prompt's blocks against what the engine reported cached, kept for the answer below;
    an empty prompt, half a LoRA or a tokenizer / URL / token-list error is kept as one line instead."""
    text = st.session_state.get(K_PROMPT, "")
    if not text.strip():
        st.session_state[K_RESULT] = ("error", T.CHECK_EMPTY)
    elif bool((st.session_state.get(K_LORA) or "").strip()) != bool((st.session_state.get(K_LORA_PATH) or "").strip()):
        st.session_state[K_RESULT] = ("error", T.LORA_BOTH)
    else:
        try:
            tokens = _prompt_tokens(tok, text)
            keys = {"cache_salt": st.session_state.get(K_SALT) or None,
                    "lora_name": (st.session_state.get(K_LORA) or "").strip() or None,
                    "lora_path": (st.session_state.get(K_LORA_PATH) or "").strip() or None}
            st.session_state[K_RESULT] = ("ok", check_prompt(sub, tokens, int(bs) or None, hash_name, seed, **keys))
        except Exception as exc:  # noqa: BLE001 - tokenizer, URL and token-list errors all become one line
            st.session_state[K_RESULT] = ("error", T.CHECK_ERROR.format(error=str(exc).splitlines()[0][:300]))


def check_result(sub) -> None:
    """The last check's answer: the cached run of the prompt's blocks as a strip, or why there is none."""
    result = st.session_state.get(K_RESULT)
    if result and result[0] == "error":
        st.error(result[1], icon=":material/error:")
        return
    if not result:
        return
    status = result[1]
    if not status.blocks:
        st.warning(T.TOO_SHORT.format(tokens=status.num_tokens, bs=status.block_size), icon=":material/warning:")
        return
    if not read_view(sub, 0).summary["batches"]:
        st.caption(T.PROMPT_NO_ENGINE_DATA)
    st.markdown((T.PROMPT_RESULT if status.complete else T.PROMPT_RESULT_PARTIAL).format(
        cached=sum(status.cached), blocks=status.blocks, run=status.cached_run, unknown=status.unknown,
        tokens=status.cached_run * status.block_size, total=status.num_tokens))
    hover = [T.PROMPT_HOVER.format(i=i, start=i * status.block_size, end=(i + 1) * status.block_size - 1,
                                   hash=hash_label(h, 16)) for i, h in enumerate(status.hashes)]
    ui_chart.plotly_chart(F.prompt_blocks_figure(status.cached, status.cached_run, status.block_size, T.PROMPT_TITLE,
                                                 T.PROMPT_LABELS, hover, complete=status.complete), width="stretch",
                          key="lv_prompt_fig")
    if isinstance(status.hashes[0], int):
        st.caption(T.HASH_KIND_NOTE)
