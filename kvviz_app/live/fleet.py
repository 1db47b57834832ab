"""The Live engine page's fleet view: several replicas watched at once, their health, each one's cached
prefixes, and where llm-d's, Dynamo's and a round-robin router would send a prompt. UI only: the fleet,
its index and the scorers are kvviz.fleet.fleet and kvviz.fleet.routing (the same as ``watch``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from kvviz.errors import CodedError
from kvviz.fleet.fleet import (
    FLEET_MAX_BLOCKS,
    STALE_AFTER_S,
    Fleet,
    ReplicaHealth,
    parse_replicas,
    shared_fleet,
)
from kvviz.mirror.hashing import HASH_FUNCTIONS, get_hash_fn, hash_block_chain, init_none_hash
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE
from kvviz_app.live import figures_fleet as F
from kvviz_app.shell import ui, ui_chart, ui_table
from kvviz_app.shell.i18n import texts

T = texts("fleet")
L = texts("live")

K_SPECS, K_DP, K_FLEET, K_ERR = "lf_specs", "lf_dp", "lf_fleet", "lf_error"
K_PROMPT, K_TOK, K_TOKNAME, K_HASH, K_SEED, K_BS, K_SALT = (
    "lf_prompt", "lf_tok", "lf_tokname", "lf_hash", "lf_seed", "lf_bs", "lf_salt")
K_ROUTED, K_TURN, K_RERR = "lf_routed", "lf_turn", "lf_route_error"
MAX_LINES = 16


def specs_from_text(text: str, dp_size: int):
    """Replicas from the text box: one per line, ``NAME=PUB [REPLAY]`` or ``PUB [REPLAY]``."""
    endpoints, replays = [], []
    lines = [ln.split() for ln in (text or "").splitlines() if ln.strip()]
    if len(lines) > MAX_LINES:
        raise CodedError(f"{len(lines)} lines is too many (at most {MAX_LINES})", "fleet_too_many_lines",
                         count=len(lines), limit=MAX_LINES)
    for i, parts in enumerate(lines):
        if len(parts) > 2:
            raise CodedError(f"line {i + 1}: expected NAME=tcp://HOST:PORT and an optional replay endpoint",
                             "fleet_line_parts", line=i + 1)
        endpoints.append(parts[0])
        if len(parts) == 2:
            name = parts[0].partition("=")[0] if "=" in parts[0] else str(i)
            replays.append(f"{name}={parts[1]}")
    return parse_replicas(endpoints, replays, dp_size)


def _connect() -> None:
    try:
        st.session_state[K_FLEET] = specs_from_text(st.session_state.get(K_SPECS, ""), int(st.session_state.get(K_DP, 1)))
        st.session_state.pop(K_ERR, None)
        st.session_state.pop(K_ROUTED, None)
    except ValueError as exc:
        st.session_state[K_ERR] = ui.error_text(exc)  # the session's language, where the error has a code


def _disconnect() -> None:
    st.session_state.pop(K_FLEET, None)
    st.session_state.pop(K_ROUTED, None)


def _health(fleet: Fleet) -> None:
    healths = fleet.healths()
    cols = T.HEALTH_COLS
    st.markdown(f"**{T.HEALTH_HEADER}**")
    show_pod = any(h.pod for h in healths)  # the pod column only when a replica's topic names one
    rows = [{
        cols["name"]: h.name, cols["status"]: T.STATUS_STALE if h.stale else L.STATUS_WORD.get(h.status, h.status),
        cols["last_seq"]: "—" if h.last_seq is None else h.last_seq, cols["gaps"]: h.gaps_filled,
        cols["errors"]: h.decode_errors, cols["blocks"]: h.blocks_held, cols["prefixes"]: h.distinct_prefixes,
        cols["churn"]: ui.loc(f"{h.churn_per_s:,.1f}"), **({cols["pod"]: h.pod or "—"} if show_pod else {})}
        for h in healths]
    ui_table.wrapping_table(pd.DataFrame(rows), key="fleet_health")  # a grid of nine columns scrolled at 1024 px
    index = fleet.cluster_index()
    st.caption(T.CLUSTER_LINE.format(distinct=len(index), shared=sum(1 for v in index.values() if len(v) > 1))
               + " " + T.STALE_NOTE.format(seconds=STALE_AFTER_S, cap=FLEET_MAX_BLOCKS))
    _media(healths)
    for h in healths:
        if h.overflow:
            st.warning(T.OVERFLOW_LINE.format(name=h.name, overflow=h.overflow), icon=":material/warning:")


def fleet_media(healths: Sequence[ReplicaHealth]) -> list[str]:
    """Every medium any replica holds blocks on, the device first, then host memory; empty when every block
    is on the device (blocks held then says it all)."""
    held = {m for h in healths for m, n in h.blocks_by_medium.items() if n}
    if not held - {"GPU"}:
        return []
    return sorted(held, key=lambda m: ({"GPU": 0, "CPU": 1}.get(m, 2), m))


def media_lines(healths: Sequence[ReplicaHealth]) -> list[str] | None:
    """Per replica its blocks by medium as "GPU n · CPU m"; None without a medium other than the device."""
    order = fleet_media(healths)
    if not order:
        return None
    return [" · ".join(f"{m} " + ui.loc(f"{h.blocks_by_medium.get(m, 0):,}") for m in order) for h in healths]


def _media(healths: Sequence[ReplicaHealth]) -> None:
    """Each replica's blocks by medium (a table of its own: the health table has no room left at 1024 px)."""
    order = fleet_media(healths)
    if not order:
        return
    st.markdown(f"**{T.MEDIA_HEADER}**")
    rows = [{T.HEALTH_COLS["name"]: h.name,
             **{T.MEDIUM_COLS.get(m) or T.MEDIUM_OTHER.format(medium=m): h.blocks_by_medium.get(m, 0) for m in order},
             T.HEALTH_COLS["blocks"]: h.blocks_held} for h in healths]
    ui_table.wrapping_table(pd.DataFrame(rows), key="fleet_media")
    st.caption(T.MEDIA_NOTE)


def _current_route(fleet: Fleet):
    """The routed prompt against the caches as they are now: (tokens, digests, block size, views, route)."""
    routed = st.session_state.get(K_ROUTED)
    if routed is None:
        return None
    tokens_n, digests, bs, loads = routed
    views, result = fleet.route(digests, tokens_n, bs, loads, st.session_state.get(K_TURN, 0))
    return tokens_n, digests, bs, views, result


def _fleet_view(fleet: Fleet) -> None:
    """Health and each replica's cached prefixes (redrawn as the caches change)."""
    _health(fleet)
    current = _current_route(fleet)
    pick = current[4].picks["longest_prefix"] if current else None
    healths = fleet.healths()
    lines = media_lines(healths)  # under each name its blocks per medium, when a replica has a host tier
    ui_chart.plotly_chart(F.prefix_columns_figure(fleet.prefix_columns(), pick, T.COLUMNS_TITLE, T.COLUMNS_LABELS,
                                                  media=lines), width="stretch", key="lf_columns")


def _route_view(fleet: Fleet) -> None:
    """The three routers' picks, every replica's scores and the prompt's heat strip (redrawn live)."""
    current = _current_route(fleet)
    if current is None:
        return
    _tokens_n, digests, bs, views, result = current
    c = st.columns(3)
    for col, key in zip(c, ("longest_prefix", "overlap_cost", "round_robin"), strict=True):
        name = result.picks[key]
        view = next((v for v in views if v.name == name), None)
        col.metric(T.PICKS[key], name or T.PICK_NONE, help=T.PICK_HELP.format(
            blocks=view.prefix_blocks, total=len(digests), name=name) if view else None)
    rc = T.ROUTE_COLS
    # an HTML table whose headers wrap: seven columns fit 1024 px without scrolling sideways
    ui_table.wrapping_table(pd.DataFrame([{
        rc["name"]: s.name, rc["prefix"]: s.prefix_blocks, rc["llmd"]: ui.loc(f"{s.longest_prefix:,.1f}"),
        rc["load"]: v.load_blocks, rc["prefill"]: ui.loc(f"{s.prefill_blocks:,.2f}"),
        rc["dynamo"]: ui.loc(f"{s.overlap_cost:,.2f}"), rc["live"]: T.YES if s.live else T.NO}
        for s, v in zip(result.scores, views, strict=True)]), key="fleet_scores")
    best = [[_best_medium(m) for m in v.held] for v in views]
    ui_chart.plotly_chart(F.heat_strip_figure([v.name for v in views], best, [v.prefix_blocks for v in views],
                                              [not v.live for v in views], result.picks["longest_prefix"], bs,
                                              T.STRIP_TITLE, T.STRIP_LABELS), width="stretch", key="lf_strip")
    st.caption(T.STRIP_PICK)


def _best_medium(media: frozenset[str]) -> str | None:
    if not media:
        return None
    return "GPU" if "GPU" in media else sorted(media)[0]


def _tokens(text: str) -> list[int]:
    tok = st.session_state.get(K_TOK, "embedded")
    if tok == "ids":
        from kvviz.cli.hash import parse_token_list

        return parse_token_list(text, T.TOKENIZERS["ids"])
    from kvviz.model import tokenize  # imports torch: only when a tokenizer is needed

    name = (st.session_state.get(K_TOKNAME) or "").strip() or None
    return list(tokenize(text, model_name=name if tok == "named" else None).ids)


def _route(fleet: Fleet) -> None:
    text = st.session_state.get(K_PROMPT, "")
    if not text.strip():
        st.session_state[K_RERR] = T.ROUTE_EMPTY
        return
    try:
        tokens = _tokens(text)
        bs = int(st.session_state.get(K_BS, 0)) or fleet.block_size() or DEFAULT_BLOCK_SIZE
        fn = get_hash_fn(st.session_state.get(K_HASH, "sha256"))
        seed = (st.session_state.get(K_SEED) or "").strip() or None
        digests = hash_block_chain(tokens, bs, fn, init_none_hash(fn, seed), st.session_state.get(K_SALT) or None)
    except Exception as exc:  # noqa: BLE001 - tokenizer, token-list and hash errors all become one line
        st.session_state[K_RERR] = T.ROUTE_ERROR.format(error=str(exc).splitlines()[0][:300])
        return
    if not digests:
        st.session_state[K_RERR] = T.ROUTE_TOO_SHORT.format(tokens=len(tokens), bs=bs)
        return
    loads = {n: int(st.session_state.get(f"lf_load_{n}", 0)) for n in fleet.names}
    st.session_state.pop(K_RERR, None)
    st.session_state[K_TURN] = st.session_state.get(K_TURN, -1) + 1
    st.session_state[K_ROUTED] = (len(tokens), digests, bs, loads)


def render() -> None:
    """The fleet view (the caller shows the page header)."""
    st.subheader(T.FLEET_HEADER)
    st.markdown(T.FLEET_INTRO)
    st.text_area(T.REPLICAS, key=K_SPECS, placeholder=T.REPLICAS_PLACEHOLDER, help=T.REPLICAS_HELP, height=110)
    c = st.columns([2, 2, 2, 1])  # the Russian "Stop" label needs the third column wide
    c[0].number_input(T.FLEET_DP, 1, 8, 1, key=K_DP)
    c[1].button(T.FLEET_CONNECT, on_click=_connect, type="primary", width="stretch")
    c[2].button(T.FLEET_DISCONNECT, on_click=_disconnect, width="stretch", disabled=K_FLEET not in st.session_state)
    st.caption(T.FLEET_DEMO)
    if K_ERR in st.session_state:
        st.error(T.FLEET_BAD.format(error=st.session_state[K_ERR]), icon=":material/error:")
    specs = st.session_state.get(K_FLEET)
    if specs is None:
        st.info(T.FLEET_NOT_CONNECTED, icon=":material/info:")
        return
    try:
        fleet = shared_fleet(specs)
    except ValueError as exc:
        st.error(T.FLEET_BAD.format(error=ui.error_text(exc)), icon=":material/error:")
        return
    st.fragment(_fleet_view, run_every=2.0)(fleet)
    st.divider()
    st.subheader(T.ROUTE_HEADER)
    st.markdown(T.ROUTE_INTRO)
    st.markdown(T.RULES)
    ui.hash_reference()
    st.text_area(T.PROMPT, key=K_PROMPT, height=90)
    c = st.columns([4, 3, 3])
    c[0].radio(T.TOKENIZER, ["embedded", "named", "ids"], key=K_TOK, format_func=lambda k: T.TOKENIZERS[k])
    names = list(HASH_FUNCTIONS)
    c[1].selectbox(T.HASH, names, index=names.index("sha256"), key=K_HASH)
    c[2].text_input(T.SEED, "", key=K_SEED)
    if st.session_state.get(K_TOK) == "named":
        st.text_input(T.TOKENIZER_NAME, "", key=K_TOKNAME)
    c = st.columns(2)
    c[0].number_input(T.BLOCK_SIZE, 0, 256, 0, key=K_BS, help=T.BLOCK_SIZE_HELP)
    c[1].text_input(T.SALT, "", key=K_SALT)
    st.markdown(f"**{T.LOADS}**", help=T.LOADS_HELP)
    cols = st.columns(min(len(fleet.names), 4))
    for i, name in enumerate(fleet.names):
        cols[i % len(cols)].number_input(name, 0, 10_000_000, 0, key=f"lf_load_{name}")
    st.button(T.ROUTE_CHECK, type="primary", on_click=_route, args=(fleet,))
    if err := st.session_state.get(K_RERR):
        st.error(err, icon=":material/error:")
    st.fragment(_route_view, run_every=2.0)(fleet)
