"""The sentences and table rows the "Edit one character" page shows for an edit and its proof, built
from the reports (no Streamlit): markdown-literal user text, the change description, the engine's run,
the chain table and the proof's facts. Numbers go through the ``fmt`` the page passes in (its locale)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from kvviz.analysis.prompt_compare import PromptComparison
from kvviz.experiments.edit.experiment import EditReport
from kvviz.experiments.edit.proof import ProofReport, WrongReuse
from kvviz.mirror.hashing import short_hash
from kvviz.util.utf8 import escaped_bytes, is_byte_piece, utf8_length
from kvviz_app.shell.i18n import texts

T = texts("edit")
render_block_reason = texts("concepts").render_block_reason

STATUS_DOT = {"hit": "🟩", "miss": "🟥", "invalidated": "🟧", "partial": "⬜"}
_MD_SPECIAL = set("\\`*_{}[]<>()#+-.!|$~&")
Fmt = Callable[[float | None], str]


def md(text: str) -> str:
    """User text made literal for st.markdown (ASCII punctuation escaped, so no markup, no LaTeX)."""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def tok(piece: str) -> str:
    """A token's text as an inline code span (repr, so spaces and controls show); a token that is only
    the first byte of a character says so."""
    shown = repr(piece).replace("`", "ˋ")
    raw = escaped_bytes(piece)
    if not raw or not is_byte_piece(piece):
        return f"`{shown}`"
    n = utf8_length(raw[0])
    return f"`{shown}`" + T.BYTE_TOKEN_NOTE.format(
        byte=" ".join(f"{b:02X}" for b in raw), n=n or "several",
        script=T.BYTE_TOKEN_CYRILLIC if raw[0] in (0xD0, 0xD1) else "")


def char_desc(chars: str) -> str:
    """Characters for a sentence: each with its code point and what it is, in the session's language
    (``'у' U+0443, small Cyrillic letter``); an invisible one by its Unicode name."""
    if not chars:
        return T.CHAR_NOTHING
    return ", ".join(_one_char(c) for c in chars)


def _one_char(c: str) -> str:
    code, name = f"{ord(c):04X}", unicodedata.name(c, "")
    if not c.isprintable() or c.isspace():
        return T.CHAR_INVISIBLE.format(code=code, name=name or T.CHAR_KINDS["C"])
    words = name.split(" ")
    scripts, cases = T.CHAR_SCRIPTS, T.CHAR_CASES
    if len(words) >= 4 and words[0] in scripts and words[1] in cases and words[2] == "LETTER":
        return T.CHAR_LETTER.format(char=repr(c), code=code, case=cases[words[1]], script=scripts[words[0]])
    kind = T.CHAR_KINDS.get(unicodedata.category(c)[0], T.CHAR_KINDS["S"])
    return T.CHAR_OTHER.format(char=repr(c), code=code, kind=kind)


def char_at(text: str, pos: int) -> str:
    """The caption under the one-character tools: which character sits at ``pos`` and around it."""
    ch = text[pos]
    before = text[max(0, pos - 20):pos].replace("\n", " ")
    after = text[pos + 1:pos + 21].replace("\n", " ")
    return T.CHAR_AT.format(pos=pos, total=len(text), desc=md(char_desc(ch)), before=md(before),
                            char=md(ch) if ch.isprintable() and not ch.isspace() else "·", after=md(after))


def describe_change(edit: EditReport) -> list[str]:
    """What the edit changed: characters, tokens, the first changed token, shifts (one line each)."""
    text_a, text_b, cmp = edit.text_a, edit.text_b, edit.comparison
    ce, te = edit.char_edit, edit.token_edit
    lines: list[str] = []
    if not ce.identical:
        removed, added = text_a[ce.start:ce.end_a], text_b[ce.start:ce.end_b]
        if len(removed) == 1 and len(added) == 1:
            lines.append(T.CHANGE_CHAR_ONE.format(pos=ce.start, removed=md(char_desc(removed)),
                                                  added=md(char_desc(added))))
        elif not removed:
            lines.append(T.CHANGE_CHAR_INSERT.format(count=len(added), pos=ce.start, added=md(char_desc(added[:3]))))
        elif not added:
            lines.append(T.CHANGE_CHAR_DELETE.format(count=len(removed), pos=ce.start,
                                                     removed=md(char_desc(removed[:3]))))
        else:
            lines.append(T.CHANGE_CHAR_MANY.format(start=ce.start, end=ce.end_a - 1, removed_count=len(removed),
                                                   added_count=len(added)))
    if te.identical:
        return lines
    span = lambda lo, hi: (T.TOKEN_SPAN.format(lo=lo, hi=hi - 1) if hi - lo > 1  # noqa: E731
                           else T.TOKEN_ONE.format(i=lo) if hi > lo else T.TOKEN_NONE)
    lines.append(T.CHANGE_TOKENS.format(a_span=span(te.start, te.end_a), b_span=span(te.start, te.end_b),
                                        first=cmp.first_changed_token))
    if len(ce.added) <= 1 and len(text_a[ce.start:ce.end_a]) <= 1 and max(te.removed_tokens, te.added_tokens) > 1:
        lines.append(T.CHANGE_MULTI.format(count=max(te.removed_tokens, te.added_tokens)))
    if te.shift != 0 and te.moved_tokens > 0:
        lines.append(T.CHANGE_SHIFT.format(shift=te.shift, moved=te.moved_tokens))
    elif te.shift == 0 and te.end_b < te.num_tokens_b:
        lines.append(T.CHANGE_NO_SHIFT)
    return lines


def identical_message(edit: EditReport) -> str:
    """The note for prompts with identical tokens: what is reused, and why not all of it."""
    cmp = edit.comparison
    if cmp.reused_tokens == 0:
        return T.IDENTICAL_SHORT.format(n=edit.num_tokens_b, block_size=cmp.block_size)
    return T.IDENTICAL_REUSE.format(n=edit.num_tokens_b, reused=cmp.reused_tokens, recompute=cmp.recompute_tokens,
                                    block_size=cmp.block_size)


def engine_note(edit: EditReport) -> str:
    """How A and B went through the engine: A cached or computed, B's reuse and shared block ids."""
    a = edit.run_a
    if a.num_cached_tokens:
        a_state = T.A_STATE_CACHED.format(tokens=a.num_computed_tokens)
    else:
        a_state = T.A_STATE_COMPUTED
    shared = edit.run_b.block_ids[:edit.shared_blocks]
    ids = ", ".join(f"#{b}" for b in shared[:8]) + (" …" if len(shared) > 8 else "")
    return T.ENGINE_NOTE.format(a_state=a_state, reused=edit.engine_reused_tokens,
                                shared=ids or T.ENGINE_SHARED_NONE, computed=edit.run_b.num_computed_tokens,
                                measured=T.M_REUSE_MS)


def chain_table_rows(cmp: PromptComparison) -> list[dict[str, object]]:
    """One row per block of B: span, both hashes, B's parent, status, reuse and the engine's reason."""
    return [
        {
            T.COL_BLOCK: blk.index,
            T.COL_SPAN: f"{blk.start}–{blk.end - 1}",
            T.COL_HASH_A: short_hash(blk.hash_a),
            T.COL_HASH_B: short_hash(blk.hash_b),
            T.COL_PARENT_B: short_hash(blk.parent_b),
            T.COL_STATUS: f"{STATUS_DOT[blk.status]} {T.STATUS_LABELS[blk.status]}",
            T.COL_REUSED: "✓" if blk.reused else "",
            T.COL_REASON: render_block_reason(blk.code, blk.params),
        }
        for blk in cmp.blocks
    ]


def proof_facts(edit: EditReport, proof: ProofReport, fmt: Fmt) -> list[str]:
    """The two facts of the K/V maps: the prefix before the first change, and layer 0 after it."""
    if proof.prefix_max_abs_diff is None:
        prefix = T.FACT_PREFIX_NONE
    elif proof.prefix_max_abs_diff == 0:
        first = proof.first_changed_token if proof.first_changed_token is not None \
            else min(edit.num_tokens_a, edit.num_tokens_b)
        prefix = T.FACT_PREFIX.format(first=first, value=fmt(proof.prefix_max_abs_diff))
    else:
        prefix = T.FACT_PREFIX_BROKEN.format(value=fmt(proof.prefix_max_abs_diff))
    if proof.layer0_after_max_abs_diff is None:
        layer0 = T.FACT_LAYER0_NONE
    else:
        layer0 = T.FACT_LAYER0.format(count=len(proof.same_after_positions), layer0=fmt(proof.layer0_after_max_abs_diff),
                                      deep=fmt(proof.deep_after_max_abs_diff))
    return [prefix, layer0]


def reuse_exact(edit: EditReport, proof: ProofReport, fmt: Fmt) -> str:
    """The sentence on the correct reuse: the engine's next-token logits against B recomputed in full."""
    reused = edit.engine_reused_tokens
    if reused and proof.logits_max_abs_diff_reuse == 0:
        return T.REUSE_IDENTICAL.format(reused=reused, token=tok(proof.next_token_full))
    if reused:
        return T.REUSE_EXACT.format(reused=reused, diff=fmt(proof.logits_max_abs_diff_reuse),
                                    token=tok(proof.next_token_full))
    return T.REUSE_EXACT_NONE.format(diff=fmt(proof.logits_max_abs_diff_reuse))


def wrong_blocks(wrong: WrongReuse, limit: int = 12) -> str:
    """The invalidated blocks the wrong reuse took from A, the first ``limit`` named."""
    return T.LIST_SEPARATOR.join(T.BLOCK_REF.format(i=i) for i in wrong.blocks[:limit]) + (
        T.LIST_MORE if len(wrong.blocks) > limit else "")


def wrong_next_token(wrong: WrongReuse) -> str:
    """Whether the wrong reuse changed the next token, with the tokens and probabilities."""
    if wrong.next_token_changed:
        return T.WRONG_NEXT_CHANGED.format(wrong=tok(wrong.next_token_wrong), correct=tok(wrong.next_token_correct))
    return T.WRONG_NEXT_SAME.format(correct=tok(wrong.next_token_correct), p_ok=wrong.prob_correct_top,
                                    p_wrong=wrong.prob_wrong_of_correct_top)
