"""The shared room page's parts (pages/room.py): the session's place in the room, its salt and prompt, the room's
totals and feed, the API's requests, the last prompt's blocks and salt chain, the presenter's reset. Views only:
the room is kvviz.experiments.room.service.get_room(); a prompt goes through kvviz.experiments.room.prefill."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from kvviz.experiments.room.prefill import room_prefill
from kvviz.experiments.room.presets import PRESETS, preset_prompt
from kvviz.experiments.room.records import YOU
from kvviz.experiments.room.room import Room
from kvviz.experiments.room.rows import last_prompt_view
from kvviz.experiments.room.timing import HitMissComparison
from kvviz.mirror.events import usable_blocks
from kvviz.mirror.hashing import REFERENCE_RELEASE, short_hash
from kvviz.model.settings import InputError
from kvviz.server import embedded  # read at call time: tests stand in an API URL and its requests
from kvviz.util.blank import is_blank
from kvviz.util.units import format_bytes
from kvviz_app.security import figures as F
from kvviz_app.security.room_labels import age_label, origin_label
from kvviz_app.shell import ui, ui_chart
from kvviz_app.shell.i18n import current_lang, texts

T = texts("security")

K_SID, K_GEN, K_TEXT, K_PRESET, K_FLASH = "room_sid", "room_generation", "room_text", "room_preset", "room_flash"
#: The preset prompts, in the selectbox's order (the first one fills the prompt of a new session).
PRESET_NAMES = list(PRESETS)


def join(room: Room) -> str:
    """This browser session's id in the room (kept across reruns); the room's generation this run draws."""
    sid = room.join(st.session_state.get(K_SID))
    st.session_state[K_SID] = sid
    st.session_state[K_GEN] = room.generation  # a reset elsewhere bumps it: the totals then redraw the page
    return sid


def default_prompt() -> None:
    """A new session starts with the first preset's prompt in the session's language."""
    if K_TEXT not in st.session_state:
        st.session_state[K_TEXT] = preset_prompt(PRESET_NAMES[0], current_lang())


def use_preset() -> None:
    """The preset selectbox's callback: its prompt replaces the text."""
    st.session_state[K_TEXT] = preset_prompt(st.session_state.get(K_PRESET, ""), current_lang())


def salt_status(room: Room, sid: str, mode: str, team: str) -> None:
    """Sets the session's salt mode (a refused team salt keeps the old salt, with a warning) and says which is on."""
    try:
        salt = room.set_salt(sid, mode, team)
    except ValueError as exc:  # a CodedError of kvviz.experiments.room.room
        st.warning(T.room_error(str(exc), getattr(exc, "code", ""), getattr(exc, "params", {})),
                   icon=":material/warning:")
        salt = room.session_view(sid).cache_salt
    view = room.session_view(sid)
    if view.salt_mode == "private" and salt:
        st.caption(T.SALT_NOW_PRIVATE.format(salt=salt[:8]))
    elif view.salt_mode == "team":
        st.caption(T.SALT_NOW_TEAM.format(team=view.team_salt))
    else:
        st.caption(T.SALT_NOW_OFF)


def send(room: Room, sid: str, text: str) -> None:
    """Prefills ``text`` on the room's engine for this session; a blank, bad or refused prompt says why."""
    if is_blank(text):
        st.warning(T.PROMPT_EMPTY, icon=":material/warning:")
        return
    try:
        out = room_prefill(room, sid, text=text)
    except InputError as exc:
        ui.show_error(exc)
        return
    if not out.admission.ok:
        st.warning(T.refusal(out.admission), icon=":material/hourglass_top:")


def _fmt_ms(ms: float | None) -> str:
    return T.NO_TIMING if ms is None else ui.loc(f"{ms:,.1f}" if ms < 10 else f"{ms:,.0f}")


def totals(room: Room) -> None:
    """The room's six numbers (a live fragment); a reset since this page was drawn redraws the whole page."""
    t = room.totals()
    if st.session_state.get(K_GEN) != room.generation:  # a reset (here, another browser or the API): redraw all
        st.rerun()
    c = st.columns(3) + st.columns(3)
    c[0].metric(T.M_SESSIONS, t.sessions_active,
                help=T.M_SESSIONS_HELP.format(total=t.sessions_total, salted=t.salted_sessions))
    c[1].metric(T.M_PROMPTS, ui.loc(f"{t.prompts:,}"), help=T.M_PROMPTS_HELP.format(refused=t.refused))
    c[2].metric(T.M_HIT_RATE, ui.loc(f"{t.hit_rate:.0%}"), help=T.M_HIT_RATE_HELP.format(hit=t.hit_tokens, total=t.prompt_tokens))
    c[3].metric(T.M_SHARED, ui.loc(f"{t.shared_blocks:,}"), help=T.M_SHARED_HELP.format(hits=t.cross_session_hits))
    # the pool's usable size: block 0 is vLLM's null block, never cached (a pool of N blocks holds N - 1)
    c[4].metric(T.M_POOL, ui.loc(f"{t.cached_blocks:,} / {usable_blocks(t.num_blocks):,}"),
                help=T.M_POOL_HELP.format(block_size=t.block_size, evictions=t.evictions))
    _timing(c[5], t.timing, t.median_wait_ms)


def _timing(cell: DeltaGenerator, c: HitMissComparison, median_wait_ms: float | None) -> None:
    """Recent hits vs misses per 100 prompt tokens, with their spread, and the sentence that follows from them."""
    hit, miss = c.hit, c.miss
    cell.metric(T.M_ROOM_TIMING, T.M_ROOM_TIMING_VALUE.format(hit=_fmt_ms(hit and hit.median),
                                                              miss=_fmt_ms(miss and miss.median)),
                help=T.M_ROOM_TIMING_HELP.format(
                    window=f"{c.window_s:.0f}", n_hit=hit.n if hit else 0, n_miss=miss.n if miss else 0,
                    hit=_fmt_ms(hit and hit.median), hit_lo=_fmt_ms(hit and hit.p25), hit_hi=_fmt_ms(hit and hit.p75),
                    miss=_fmt_ms(miss and miss.median), miss_lo=_fmt_ms(miss and miss.p25),
                    miss_hi=_fmt_ms(miss and miss.p75), wait=_fmt_ms(median_wait_ms)))
    load = ui.loc(f"{c.load_per_core:.1f}") if c.load_per_core is not None else T.NO_TIMING
    cell.caption(T.TIMING_VERDICTS[c.verdict].format(load=load, window=f"{c.window_s:.0f}"))


def feed(room: Room, sid: str) -> None:
    """The room's last 20 prompts (a live fragment): a chart, and the rows in an expander."""
    entries = room.feed(sid, limit=20)
    if not entries:
        st.caption(T.FEED_EMPTY)
        return
    cols = T.FEED_COLUMNS
    rows = [{
        cols["who"]: T.WHO_YOU if e.who == YOU else T.WHO_OTHER,
        cols["tokens"]: e.num_tokens,
        cols["reused"]: e.hit_tokens,
        cols["from_others"]: e.blocks_from_others,
        cols["salted"]: T.YES if e.salted else T.NO,
        cols["prefill"]: None if e.prefill_ms is None else round(e.prefill_ms, 1),
        cols["wait"]: None if e.wait_ms is None else round(e.wait_ms, 1),
        cols["step"]: e.step_requests,
        cols["age"]: age_label(e.age_s),
    } for e in entries]
    ui_chart.plotly_chart(F.feed_chart(entries), width="stretch", key="room_feed_chart")
    with st.expander(T.FEED_TABLE):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def api_requests() -> None:
    """The OpenAI-compatible API's last ten finished requests on the same engine, or why there are none."""
    st.subheader(T.API_REQUESTS)
    url = embedded.get_api_url()
    if url is None:
        st.caption(T.API_REQUESTS_OFF)
        return
    st.caption(T.API_REQUESTS_INTRO.format(url=f"{url}/v1"))
    done = embedded.recent_requests()[::-1][:10]
    if not done:
        st.info(T.API_REQUESTS_NONE, icon=":material/info:")
        return
    cols, now = T.API_COLUMNS, time.time()
    st.dataframe(pd.DataFrame([{cols["client"]: r.client, cols["prompt"]: r.prompt_tokens,
                                cols["cached"]: r.cached_tokens, cols["output"]: r.output_tokens,
                                cols["age"]: age_label(now - r.finished_at)} for r in done]),
                 hide_index=True, width="stretch")


def last_prompt(room: Room, sid: str) -> None:
    """This session's last prompt: its numbers, its blocks by origin and, below, why the salt isolates."""
    last = last_prompt_view(room, sid)
    st.subheader(T.LAST_PROMPT)
    ui.hash_reference()
    if last is None:
        st.info(T.NO_PROMPT_YET, icon=":material/info:")
        return
    adm = last.admission
    c = st.columns(5)
    c[0].metric(T.M_TOKENS, ui.loc(f"{adm.num_tokens:,}"))
    c[1].metric(T.M_FROM_OTHERS, ui.loc(f"{last.from_others_tokens:,}"), help=T.M_FROM_OTHERS_HELP)
    c[2].metric(T.M_FROM_YOU, ui.loc(f"{last.from_you_tokens:,}"))
    c[3].metric(T.M_COMPUTED, ui.loc(f"{adm.computed_tokens:,}"), help=T.M_COMPUTED_HELP)
    c[4].metric(T.M_PREFILL, ui.loc(T.M_PREFILL_VALUE.format(compute=adm.compute_ms, wait=adm.wait_ms)),
                help=T.M_PREFILL_HELP.format(computed=adm.computed_tokens, reused=adm.hit_tokens,
                                             step=adm.step_requests))
    if adm.truncated:
        st.caption(T.TRUNCATED.format(before=adm.num_tokens_before_truncation, kept=adm.num_tokens))
    ui_chart.plotly_chart(F.block_strip(adm, room.now()), width="stretch", key="room_strip")
    with st.expander(T.BLOCK_TABLE):
        cols = T.BLOCK_COLUMNS
        st.dataframe(pd.DataFrame([{
            cols["index"]: b.index, cols["tokens"]: f"{b.first}-{b.last}", cols["status"]: T.STATUS_LABELS[b.status],
            cols["origin"]: origin_label(b.who, b.age_s) if b.status.startswith("hit") else
            (T.WHO_YOU if b.status == "computed" else ""),
            cols["hash"]: short_hash(b.block_hash, 16),
        } for b in last.blocks]), hide_index=True, width="stretch")

    # ------------------------------------------------------------------------- why the salt isolates
    st.subheader(T.SALT_WHY)
    if last.illustrative:
        st.caption(T.SALT_WHY_OFF)
        salt_name = T.SALT_NAME_ILLUSTRATIVE
    else:
        salt_name = T.SALT_NAME_TEAM if adm.salt_mode == "team" else T.SALT_NAME_PRIVATE
    st.markdown(T.SALT_WHY_INTRO.format(salt_name=salt_name, release=REFERENCE_RELEASE))
    ui_chart.plotly_chart(F.salt_chain(last.plain, last.salted, last.plain_cached, last.salted_cached, salt_name),
                          width="stretch", key="room_salt_chain")
    with st.expander(T.BLOCK_TABLE):
        cols = T.SALT_COLUMNS
        st.dataframe(pd.DataFrame([{
            cols["index"]: r.index, cols["plain"]: short_hash(r.plain_hash, 16),
            cols["plain_cached"]: T.YES if r.plain_cached else T.NO, cols["salted"]: short_hash(r.salted_hash, 16),
            cols["salted_cached"]: T.YES if r.salted_cached else T.NO,
            cols["extra"]: T.SALT_EXTRA_KEY if r.salt_key else "-",
        } for r in last.salt_rows]), hide_index=True, width="stretch")


def presenter(room: Room) -> None:
    """The presenter's expander: the room's limits and, with the presenter key, the reset of the whole room."""
    flash = st.session_state.pop(K_FLASH, None)
    with st.expander(T.PRESENTER, icon=":material/admin_panel_settings:", expanded=flash is not None):
        if flash is not None:
            st.success(flash, icon=":material/check:")
        lim, engine = room.limits, room.loop.engine
        blocks = usable_blocks(engine.num_blocks)
        st.markdown(T.PRESENTER_INTRO.format(
            blocks=blocks, block_size=engine.block_size, tokens=blocks * engine.block_size,
            kv=ui.loc(format_bytes(engine.kv_cache_bytes)), burst=lim.burst,
            every=1 / lim.refill_per_s if lim.refill_per_s else 0, max_tokens=lim.max_prompt_tokens))
        st.caption(T.WORKSHOP_HINT)
        key = st.text_input(T.PRESENTER_KEY, type="password", key="room_presenter_key", help=T.PRESENTER_KEY_HELP)
        if st.button(T.RESET, key="room_reset", icon=":material/restart_alt:"):
            res = room.reset(key)
            if res.ok:
                st.session_state[K_FLASH] = T.RESET_DONE.format(dropped=res.dropped_blocks)
                st.rerun()
            else:
                st.warning(T.refusal(res), icon=":material/warning:")
