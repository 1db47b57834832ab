"""Streamlit glue for shareable state: a page's widget state restored from and written to the URL.

A page calls ``restore(page, schema)`` once its defaults are in session_state and before its widgets,
and ``sync(page, schema)`` after them. Restoring happens only when the URL's params for the page are none
this session wrote while on the page, so typing is never undone by a stale URL (a quick keystroke's rerun
can leave the browser before the URL of the last run arrived). Text too long for a link stays out of it.
Rejected values keep the page's defaults and show one notice. The pure parsing lives in kvviz_app.shell.share.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import streamlit as st

from kvviz_app.shell import share
from kvviz_app.shell.i18n import current_lang, format_number, texts
from kvviz_app.shell.paths import PATHS
from kvviz_app.shell.share import GLOBAL_PARAMS, Param

T = texts("share")

_SIG = "_share_sig_{page}"
_SLOT = "_share_slot_{page}"
_WRITTEN = "_share_written_{page}"  # the last signatures this session wrote into the URL on the page
_PAGE_NOW, _PAGE_BEFORE = "_share_page_now", "_share_page_before"  # the page of this run and of the last
_WRITTEN_KEPT = 16
GLOBALS_KEY = "_share_globals"  # {name: text} of the global params this session carries along


def _raw() -> dict[str, list[str]]:
    return {name: st.query_params.get_all(name) for name in st.query_params}


def _signature(raw: Mapping[str, list[str]] | Mapping[str, str], schema: Mapping[str, Param]) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else (v,)) for k, v in raw.items() if k in schema))


PRESENT_KEY = "kvviz_present"  # session_state: presenter mode on (the sidebar toggle's key)
PATH_KEY = "kvviz_path"  # session_state: the guided path id, or None
_SEEN = "_share_seen_globals"  # the raw global params last applied, so a toggle is not undone by the URL


def read_globals() -> None:
    """Apply ``?present=``, ``?path=`` and ``?lang=`` from the URL when they changed since last seen.
    Bad values are ignored (the previous setting stays); ``lang`` is only carried along."""
    ss = st.session_state
    seen = ss.setdefault(_SEEN, {})
    for name in GLOBAL_PARAMS:
        given = st.query_params.get_all(name)
        raw = given[-1] if given and len(set(given)) == 1 else None
        if raw is None or seen.get(name) == raw:
            continue
        seen[name] = raw
        if name == "present":
            with contextlib.suppress(ValueError):
                ss[PRESENT_KEY] = share.flag(raw)
        elif name == "path":
            ss[PATH_KEY] = raw if raw in PATHS else None
        elif len(raw) <= 16 and raw.isascii() and raw.replace("-", "").replace("_", "").isalnum():
            ss[GLOBALS_KEY] = {**ss.get(GLOBALS_KEY, {}), name: raw}


def presenting() -> bool:
    """True when this session is in presenter mode."""
    return bool(st.session_state.get(PRESENT_KEY, False))


def current_path() -> str | None:
    """The guided path this session follows, or None."""
    path = st.session_state.get(PATH_KEY)
    return path if path in PATHS else None


def carried_globals() -> dict[str, str]:
    """The global params (presenter mode, path, language) this session carries into every link."""
    carried = dict(st.session_state.get(GLOBALS_KEY, {}))
    if presenting():
        carried["present"] = "1"
    if current_path():
        carried["path"] = str(current_path())
    return carried


def note_page() -> None:
    """Once a run, at the top of the page (ui.page_header): which page runs now and which ran before."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    ss = st.session_state
    ss[_PAGE_BEFORE] = ss.get(_PAGE_NOW)
    ss[_PAGE_NOW] = ctx.page_script_hash if ctx is not None else None


def restore(page: str, schema: Mapping[str, Param], link_here: bool = True) -> None:
    """Fill session_state from the URL's params for this page (when they changed) and reserve the
    place of the page's "Copy link" control (``link_here=False``: the page reserves it later with
    :func:`link_slot`). Bad values are named in one notice; defaults stay."""
    ss = st.session_state
    raw = _raw()
    sig = _signature(raw, schema)
    _fill_defaults(schema)
    if link_here:
        link_slot(page)
    if ss.get(_PAGE_BEFORE) != ss.get(_PAGE_NOW):  # entering: a link may bring back an earlier state
        ss[_WRITTEN.format(page=page)] = []
    if ss.get(_SIG.format(page=page)) == sig or sig in ss.get(_WRITTEN.format(page=page), []):
        return  # this session's own URL, perhaps one the browser had not updated yet: keep what was typed
    ss[_SIG.format(page=page)] = sig
    values, rejected = share.read(schema, raw)
    for name, value in values.items():
        ss[schema[name].key] = value
    if rejected:
        st.warning(T.BAD_PARAMS.format(names=", ".join(sorted(rejected))), icon=":material/link_off:")


def _fill_defaults(schema: Mapping[str, Param]) -> None:
    """Each param's default into session_state where its key has no value: the page's widgets read it
    from there and take no value of their own (a widget given a value while a link had set its key logs
    Streamlit's duplicate-value warning, with a stack, into the server's terminal)."""
    ss = st.session_state
    for param in schema.values():
        if param.default is not None and param.key not in ss:
            ss[param.key] = param.default


def link_slot(page: str) -> None:
    """Reserve the place of the page's "Copy link" control here (e.g. in a row of buttons)."""
    st.session_state[_SLOT.format(page=page)] = st.empty()


def current_params(schema: Mapping[str, Param]) -> dict[str, str]:
    """The link form of this page's state plus the carried global params."""
    ss = st.session_state
    values = {name: ss[p.key] for name, p in schema.items() if p.key in ss}
    params = share.write(schema, values)
    params.update(carried_globals())
    return params


def page_url(params: Mapping[str, str]) -> str:
    """The full URL of this page with ``params``; a loopback host is replaced by the LAN address when
    the server listens on the LAN (a presenter copying a link from http://localhost)."""
    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser (AppTest): a relative link
        base = ""
    url = share.link(base, params) if base else "?" + share.link("", params).lstrip("?")
    return share.public_url(url, lan_address()) if base and serves_lan() else url


def serves_lan() -> bool:
    """True when this server listens beyond loopback (so its LAN address answers other machines)."""
    address = (st.get_option("server.address") or "").strip()
    return address in ("", "0.0.0.0", "::") or not share.is_local_host(address)


@st.cache_resource(show_spinner=False, ttl=60)
def lan_address() -> str:
    """The server's LAN address (looked up at most once a minute)."""
    return share.lan_address()


def sync(page: str, schema: Mapping[str, Param], draw: bool = True) -> None:
    """Write this page's state into the URL (only when it changed) and, with ``draw``, the "Copy link"
    control in the place ``restore`` reserved (a fragment passes False: it cannot draw outside itself)."""
    ss = st.session_state
    params = current_params(schema)
    if params != {k: st.query_params.get(k) for k in st.query_params}:
        st.query_params.from_dict(params)
    sig = _signature(params, schema)
    ss[_SIG.format(page=page)] = sig
    written = [s for s in ss.get(_WRITTEN.format(page=page), []) if s != sig]
    ss[_WRITTEN.format(page=page)] = [*written, sig][-_WRITTEN_KEPT:]
    slot = ss.get(_SLOT.format(page=page))
    if slot is None or not draw:
        return
    left_out = share.too_long(schema, {name: ss[p.key] for name, p in schema.items() if p.key in ss})
    with slot.container(), st.popover(T.COPY_LINK, icon=":material/link:"):
        st.caption(T.COPY_LINK_HELP)
        if left_out:
            limit = format_number(min(left_out.values()), current_lang())
            st.caption(T.TOO_LONG_TO_SHARE.format(limit=limit))
        st.code(page_url(params), language=None, wrap_lines=True)
