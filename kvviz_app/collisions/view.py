"""The sections of the "Hash collisions" page, each a function that draws one part (the page script calls
them in order), with the page's cached computations and session state. Every number comes from
kvviz.experiments.security.collisions and kvviz.experiments.security.collision_leak."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.experiments.security.collision_leak import CollisionLeak, collision_leak
from kvviz.experiments.security.collisions import (
    DEFAULT_PROMPT_A,
    DEFAULT_PROMPT_B,
    CollisionDemo,
    HashCost,
    NoneHashDemo,
    PythonHashFacts,
    birthday_blocks,
    force_collision,
    measure_hash_costs,
    none_hash_demo,
    python_hash_facts,
)
from kvviz.mirror.hashing import short_hash
from kvviz.model import LoadedModel, token_pieces, tokenize
from kvviz.model.settings import InputError
from kvviz_app.security import figures as F
from kvviz_app.shell import ui, ui_chart, ui_table
from kvviz_app.shell.i18n import texts

T = texts("collisions")
T_SEC = texts("security")

BITS_OPTIONS = [8, 12, 16, 20]
BLOCK = 16
COSTS_RUN = "col_costs_run"  # session key: how many times "measure again" was pressed (the costs' cache key)


@st.cache_data(show_spinner=False, max_entries=1)
def _py_facts() -> PythonHashFacts:
    return python_hash_facts()


@st.cache_data(show_spinner=False, max_entries=16)
def _none_demo(ids: tuple[int, ...]) -> NoneHashDemo:
    return none_hash_demo(ids, BLOCK)


@st.cache_data(show_spinner=False, max_entries=32)
def _collision(a: tuple[int, ...], b: tuple[int, ...], bits: int, vocab: int) -> CollisionDemo:
    return force_collision(a, b, bits=bits, block_size=BLOCK, vocab_size=vocab)


@st.cache_data(show_spinner=False, max_entries=16)
def _leak_of(model: str, tokens_a: tuple[int, ...], tokens_b: tuple[int, ...], hit_blocks: int,
             _lm: LoadedModel, _col: CollisionDemo) -> CollisionLeak:
    """The collision's served answer, kept per model and collision (the key: both prompts' tokens and the
    blocks the toy pool serves; ``_lm`` and ``_col`` are not hashed)."""
    return collision_leak(_lm, _col, new_tokens=6)


@st.cache_data(show_spinner=False, max_entries=1)
def _costs(run: int) -> list[HashCost]:
    return measure_hash_costs(num_blocks=2000, block_size=BLOCK, repeats=5)


def python_hash() -> None:
    """Python's own ``hash()`` across two interpreter runs: which values change with the seed."""
    st.subheader(T.PY_HASH)
    facts = _py_facts()
    st.markdown(T.PY_HASH_INTRO.format(version=facts.python_version))
    cols = T.PY_COLUMNS
    st.dataframe(pd.DataFrame([{
        cols["expr"]: r.expr, cols["run1"]: r.run1, cols["run2"]: r.run2,
        cols["same"]: T_SEC.YES if r.same else T_SEC.NO,
    } for r in facts.rows]), hide_index=True, width="stretch")
    st.caption(T.PY_SEEDS.format(a=facts.seeds[0], b=facts.seeds[1]))
    st.markdown("\n".join(f"- `{r.expr}`: {T.PY_NOTES[r.expr]}" for r in facts.rows))
    st.markdown(T.PY_HASH_TEXT)


def none_hash(lm: LoadedModel) -> None:
    """NONE_HASH: the chain's root with a fixed seed, and with a random one, on the default prompt B."""
    st.subheader(T.NONE_HASH)
    ui.hash_reference()
    st.markdown(T.NONE_HASH_TEXT)
    sample = tokenize(DEFAULT_PROMPT_B, model_name=lm.source.key).ids
    demo = _none_demo(tuple(sample))
    cols = T.NONE_COLUMNS
    # an HTML table that wraps between words: a data grid scrolled sideways at 1024 px in Russian, and a
    # table free to break anywhere split its header "Block" into "Blo" / "ck"
    ui_table.wrapping_table(pd.DataFrame([{
        cols["setting"]: T.NONE_ROWS[k], cols["root"]: short_hash(demo.roots[k], 16),
        cols["block0"]: short_hash(demo.chains[k][0], 16), cols["last"]: short_hash(demo.chains[k][-1], 16),
    } for k in T.NONE_ROWS]), key="col_none")
    st.caption(T.NONE_VERDICT.format(same=T_SEC.YES if demo.seeded_equal else T_SEC.NO,
                                     differ=T_SEC.YES if demo.random_all_differ else T_SEC.NO))


def forced_inputs(lm: LoadedModel) -> CollisionDemo | None:
    """The forced collision's widgets (toy hash bits, prompts A and B) and its search; None on bad input
    (the error is shown)."""
    st.subheader(T.FORCED)
    bits = st.select_slider(T.FORCED_BITS, BITS_OPTIONS, value=16, key="col_bits")
    st.markdown(T.FORCED_INTRO.format(bits=bits, positions=2))
    c = st.columns(2)
    text_a = c[0].text_area(T.FORCED_A, DEFAULT_PROMPT_A, key="col_a", height=110)
    text_b = c[1].text_area(T.FORCED_B, DEFAULT_PROMPT_B, key="col_b", height=110)
    try:
        ids_a = tuple(tokenize(text_a, model_name=lm.source.key, max_tokens=256).ids)
        ids_b = tuple(tokenize(text_b, model_name=lm.source.key, max_tokens=256).ids)
        return _collision(ids_a, ids_b, bits, lm.info.vocab_size)
    except (InputError, ValueError) as exc:
        ui.show_error(exc)
        return None


def forced_result(lm: LoadedModel, col: CollisionDemo) -> None:
    """What the collision serves: the blocks hit, both prompts' first blocks and hashes, then the leak."""
    if not col.found:
        st.warning(T.FORCED_NOT_FOUND.format(tries=col.tries), icon=":material/warning:")
        return
    st.success(T.FORCED_FOUND.format(tries=col.tries, ms=col.search_ms, expected=col.expected_tries,
                                     toy=col.toy_hashes_a[0].hex()), icon=":material/bolt:")
    st.markdown(T.FORCED_SERVED.format(hit=col.hit_blocks, ids=list(col.served_block_ids),
                                       sha_hit=col.sha_hit_blocks))
    pieces_a = token_pieces(lm.tokenizer, list(col.tokens_a))
    pieces_b = token_pieces(lm.tokenizer, list(col.tokens_b))
    cols = T.FORCED_COLUMNS
    n = min(len(col.sha_hashes_a), len(col.sha_hashes_b), 3)
    tokens, hashes = [], []
    for i in range(n):
        sl = slice(i * BLOCK, (i + 1) * BLOCK)
        tokens.append({cols["index"]: i, cols["a"]: "|".join(ui.visible_piece(p) for p in pieces_a[sl]),
                       cols["b"]: "|".join(ui.visible_piece(p) for p in pieces_b[sl])})
        hashes.append({cols["index"]: i, cols["toy_a"]: col.toy_hashes_a[i].hex(),
                       cols["toy_b"]: col.toy_hashes_b[i].hex(), cols["sha_a"]: short_hash(col.sha_hashes_a[i], 16),
                       cols["sha_b"]: short_hash(col.sha_hashes_b[i], 16)})
    st.table(pd.DataFrame(tokens))  # wraps long token runs at 1024 px
    st.dataframe(pd.DataFrame(hashes), hide_index=True, width="stretch")
    st.caption(T.FORCED_PIECES)
    _leak(lm, col)


def _leak(lm: LoadedModel, col: CollisionDemo) -> None:
    """The answer the colliding blocks serve beside the correct one (a real generation on the model)."""
    st.markdown(f"**{T.LEAK}**")
    with st.spinner(T.LEAK_RUNNING):
        leak = _leak_of(lm.info.model_id, col.tokens_a, col.tokens_b, col.hit_blocks, lm, col)
    st.markdown(T.LEAK_INTRO.format(n=len(leak.correct_ids)))
    c = st.columns(2)
    c[0].markdown(f"{T.LEAK_CORRECT}:")
    c[0].code(leak.correct_text or "∅", language=None)
    c[1].markdown(f"{T.LEAK_SERVED}:")
    c[1].code(leak.served_text or "∅", language=None)
    st.caption(T.LEAK_METRICS.format(diff=leak.logits_max_abs_diff,
                                     changed=T_SEC.YES if leak.next_token_changed else T_SEC.NO))


def _measure_again() -> None:
    st.session_state[COSTS_RUN] = st.session_state.get(COSTS_RUN, 0) + 1


def costs() -> None:
    """Each hash function's measured cost (measured again on request) and the birthday bound."""
    st.subheader(T.COSTS)
    if st.button(T.COSTS_AGAIN, key="col_costs_again", icon=":material/refresh:"):
        _measure_again()
    measured = _costs(st.session_state.get(COSTS_RUN, 0))
    st.markdown(T.COSTS_INTRO.format(blocks=2000, block_size=BLOCK, repeats=5))
    # one under the other: side by side, each had under 300 px at 1024 px and cut its title and labels
    ui_chart.plotly_chart(F.hash_cost_figure(measured), width="stretch", key="col_costs")
    ui_chart.plotly_chart(F.birthday_figure(), width="stretch", key="col_birthday")
    st.caption(T.BIRTHDAY_NOTE)
    cols = T.COST_COLUMNS
    # an HTML table whose headers wrap, so the last columns stay in view at 1024 px; words stay whole and a
    # hash name breaks only after an underscore (a table free to break anywhere printed "cbor_o" / "nly")
    ui_table.wrapping_table(pd.DataFrame([{
        cols["name"]: ui_table.header_label(c.name), cols["digest"]: str(c.digest_bytes) if c.digest_bytes else "—",
        cols["ns_block"]: ui.loc(f"{c.ns_per_block:,.0f}"), cols["ns_token"]: ui.loc(f"{c.ns_per_token:,.1f}"),
        cols["ms_50k"]: ui.loc(f"{c.ms_per_50k_tokens:,.2f}"),
        cols["birthday"]: ui.loc(f"{birthday_blocks(8 * c.digest_bytes):.2g}") if c.digest_bytes else "—",
        cols["safe"]: T.SAFE.get(c.name, ""),
    } for c in measured]), key="col_costs_table")
