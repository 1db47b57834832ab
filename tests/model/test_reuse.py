"""The "edit one character" experiment on the real model and kvviz's engine: the rules the page teaches,
checked on the engine's counts and block tables and on captured tensors (short prompts), the CLI's keys,
presets, and bad input."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.cli import main as cli_main
from kvviz.experiments.edit.diffs import (
    char_diff,
    describe_char,
    invisible_chars,
    piece_text,
    replace_char,
    token_char_offsets,
    token_diff,
)
from kvviz.experiments.edit.experiment import run_edit
from kvviz.experiments.edit.inputs import EditInputs, edit_inputs
from kvviz.experiments.edit.presets import load_edit_presets
from kvviz.experiments.edit.report import CLI_KEYS, cli_summary, run_reuse_experiment
from kvviz.model import InputError, load_model, tokenize

pytestmark = pytest.mark.model

SENTENCE = "The cat sat on the mat and looked at the rain."
BAT = "The bat sat on the mat and looked at the rain."


@pytest.fixture(scope="module")
def lm():
    return load_model()


@pytest.fixture(scope="module")
def early_edit(lm):
    """One letter early in the prompt, same token count: a miss, then invalidated blocks."""
    return run_reuse_experiment(lm, edit_inputs(SENTENCE, BAT, 4))


# ----------------------------------------------------------------------------- pure helpers


def test_replace_char_and_diffs():
    assert replace_char("Кот", 1, "и") == "Кит"
    assert replace_char("abc", 1, "") == "ac" and replace_char("abc", 3, "d") == "abcd"
    with pytest.raises(InputError):
        replace_char("abc", 5, "x")
    with pytest.raises(InputError):
        replace_char("abc", 0, "xy")
    d = char_diff("Кот сидит", "Кит сидит")
    assert (d.start, d.removed, d.added) == (1, "о", "и") and not d.identical
    assert char_diff("same", "same").identical
    t = token_diff([1, 2, 3, 4, 5], [1, 2, 9, 9, 4, 5])
    assert (t.start, t.end_a, t.end_b, t.shift, t.moved_tokens) == (2, 3, 4, 1, 2)
    assert t.changed_positions_a == [2] and t.changed_positions_b == [2, 3]
    assert token_diff([1, 2], [1, 2]).identical
    assert "CYRILLIC" in describe_char("о") and "LATIN" in describe_char("o") and "U+0007" in describe_char("\a")
    # the page's notice about invisible characters: zero-width space, BOM, bell; not newline or tab
    assert invisible_chars("a\u200bb\ufeff\n\tc\a\u200b") == ["\u200b", "\ufeff", "\a"]
    assert invisible_chars("plain text\r\n") == []


# ----------------------------------------------------------------------------- the rules on real tensors


def test_prefix_is_bit_identical_and_layer0_survives_the_edit(early_edit, lm):
    edit, proof = early_edit.edit, early_edit.proof
    first = edit.first_changed_token
    assert first == 1 and edit.token_edit.shift == 0
    n = min(edit.num_tokens_a, edit.num_tokens_b)
    assert proof.heat_k.shape == proof.heat_v.shape == (lm.info.num_layers, n)
    # before the first changed token: exactly zero at every layer, K and V
    assert np.all(proof.heat_k[:, :first] == 0) and np.all(proof.heat_v[:, :first] == 0)
    assert proof.prefix_max_abs_diff == 0.0 and proof.prefix_identical
    # after it: layer 0 unchanged where id and position are unchanged; deeper layers differ
    after = proof.same_after_positions
    assert after == list(range(first + 1, n))
    assert np.all(proof.heat_k[0, after] == 0) and np.all(proof.heat_v[0, after] == 0)
    assert proof.layer0_unchanged_after_edit is True
    assert proof.deep_layers_changed_after_edit is True and np.all(proof.heat_k[1:, after].max(axis=0) > 0)
    assert proof.heat_k[0, first] > 0  # the changed token itself differs even at layer 0


def test_wrong_reuse_diverges_far_beyond_float_noise(early_edit):
    edit, proof = early_edit.edit, early_edit.proof
    statuses = [b.status for b in edit.comparison.blocks]
    assert statuses[0] == "miss" and "invalidated" in statuses
    wrong = proof.wrong_reuse
    assert wrong is not None and wrong.blocks and all(statuses[i] == "invalidated" for i in wrong.blocks)
    assert wrong.logits_max_abs_diff > 0.05 and wrong.kl > 0
    assert wrong.logits_max_abs_diff > 50 * max(proof.logits_max_abs_diff_reuse, 1e-4)
    summary = cli_summary(early_edit)
    assert tuple(summary) == CLI_KEYS
    assert summary["next_token_changed_wrong_reuse"] == wrong.next_token_changed


def test_tail_edit_reuses_whole_blocks_and_reuse_is_exact(lm):
    b = SENTENCE[:-1] + "!"
    x = run_reuse_experiment(lm, edit_inputs(SENTENCE, b, 4))
    edit, proof = x.edit, x.proof
    n = edit.num_tokens_b
    cmp = compare_prompts(tokenize(SENTENCE).ids, tokenize(b).ids, block_size=4)
    assert edit.reused_tokens == cmp.reused_tokens == ((n - 1) // 4) * 4 > 0
    assert edit.engine_reused_tokens == edit.reused_tokens  # the engine reused exactly those blocks
    assert edit.run_b.num_computed_tokens == n - edit.reused_tokens
    # B's block table starts with A's physical blocks, then blocks of its own
    shared = edit.shared_blocks
    assert edit.run_b.block_ids[:shared] == edit.run_a.block_ids[:shared] and shared == edit.reused_tokens // 4
    assert len(edit.run_b.block_ids) == -(-n // 4)
    assert not set(edit.run_b.block_ids[shared:]) & set(edit.run_a.block_ids[:shared])
    assert proof.reference == "engine" and proof.logits_max_abs_diff_reuse < 1e-3
    assert proof.next_token_id_full == edit.next_token_id_reuse
    assert proof.wrong_reuse is None  # nothing after the edit: no invalidated block
    assert edit.reused_share == edit.reused_tokens / n
    timing = x.timing
    c = timing.comparison
    assert len(c.slow_ms) >= 3 and len(c.fast_ms) >= 3 and min(c.slow_ms + c.fast_ms) > 0
    assert set(timing.full_cached_tokens) == {0}  # a fresh salt: the full side recomputes everything
    assert set(timing.reuse_cached_tokens) == {edit.reused_tokens}
    assert x.full_prefill_ms == c.slow_median_ms and x.reuse_prefill_ms == c.fast_median_ms
    if c.measured:  # a measured saving is positive, its speed-up above 1; otherwise neither exists
        assert c.saved_ms > 0 and c.speedup > 1
    else:
        assert c.saved_ms is None and c.speedup is None


def test_an_earlier_b_never_counts_as_reuse(lm):
    """Running the same edit twice: the engine's count stays what A alone gives (B's own blocks, cached
    by the first run, are not reused: the second run goes under the next salt)."""
    b = SENTENCE.replace("mat", "hat")  # its own full blocks follow the edit
    first = run_edit(lm, edit_inputs(SENTENCE, b, 4))
    second = run_edit(lm, edit_inputs(SENTENCE, b, 4))
    assert first.engine_reused_tokens == second.engine_reused_tokens == first.comparison.reused_tokens
    assert second.cache_salt != first.cache_salt


def test_identical_prompts_reuse_all_but_the_last_token(lm):
    x = run_reuse_experiment(lm, edit_inputs(SENTENCE, SENTENCE, 4))
    edit, proof = x.edit, x.proof
    n = edit.num_tokens_b
    assert edit.identical and edit.first_changed_token is None
    assert edit.reused_tokens == ((n - 1) // 4) * 4 and edit.recomputed_tokens >= 1
    assert proof.wrong_reuse is None and proof.layer0_unchanged_after_edit is None
    assert proof.deep_layers_changed_after_edit is None and proof.prefix_max_abs_diff == 0.0


def test_nothing_in_common_and_shifted_tokens(lm):
    x = run_reuse_experiment(lm, edit_inputs("Hello there.", "Goodbye, my dear friend, see you soon.", 4))
    edit, proof = x.edit, x.proof
    assert x.timing is None and edit.engine_reused_tokens == 0 and proof.reference == "model"
    assert edit.first_changed_token == 0 and edit.reused_tokens == 0
    assert edit.reused_share == 0.0
    assert all(b.status in ("miss", "partial") for b in edit.comparison.blocks)
    assert proof.wrong_reuse is None and proof.prefix_max_abs_diff is None


def test_bad_and_unusual_input(lm):
    with pytest.raises(InputError, match="original prompt"):
        run_edit(lm, edit_inputs("   ", "x"))
    with pytest.raises(InputError, match="edited prompt"):
        run_edit(lm, edit_inputs("x", "\n\t"))
    with pytest.raises(ValueError):
        run_edit(lm, edit_inputs("a", "b", hash_name="md5"))
    long = run_edit(lm, edit_inputs(SENTENCE * 3, BAT * 3, max_tokens=8))
    assert long.num_tokens_a == long.num_tokens_b == 8 and len(long.notices) == 2
    odd = run_edit(lm, edit_inputs("שלום 👋 \x07 مرحبا", "שלום 👋 \x08 مرحبا", 2))
    assert odd.first_changed_token is not None and odd.num_tokens_b > 3
    offsets = token_char_offsets(lm, SENTENCE, 3)
    assert offsets[0] == 0 and SENTENCE[offsets[1]:].startswith(" cat")


# ----------------------------------------------------------------------------- presets and the CLI


def test_presets_do_what_their_descriptions_say():
    presets = {p.id: p for p in load_edit_presets()}
    assert {"system_start", "system_tail", "cat_window", "on_green", "homoglyph"} <= set(presets)
    for p in presets.values():
        assert p.a != p.b and p.title and p.description
    ids = {k: (tokenize(p.a).ids, tokenize(p.b).ids) for k, p in presets.items()}
    start, tail = ids["system_start"], ids["system_tail"]
    assert len(start[0]) > 400 and token_diff(*start).start < 16 and token_diff(*tail).start > 400
    assert compare_prompts(*tail).reused_tokens > 400 and compare_prompts(*start).reused_tokens == 0
    cat = compare_prompts(*ids["cat_window"], block_size=presets["cat_window"].block_size)
    assert {b.status for b in cat.blocks} == {"hit", "miss", "invalidated", "partial"}
    green = compare_prompts(*ids["on_green"], block_size=presets["on_green"].block_size)
    assert "invalidated" in {b.status for b in green.blocks}  # the same «на зелёном» tokens, other prefix
    # the hero default: the same one-letter edit near the end and at the start
    assert list(presets)[:2] == ["cat_tail", "cat_start"] and presets["cat_tail"].a == presets["cat_start"].a
    hero_tail, hero_start = compare_prompts(*ids["cat_tail"]), compare_prompts(*ids["cat_start"])
    assert len(ids["cat_tail"][0]) > 200 and hero_tail.reused_tokens >= 0.9 * len(ids["cat_tail"][1])
    assert hero_start.reused_tokens == 0 and len(ids["cat_tail"][0]) == len(ids["cat_tail"][1])
    glyph = ids["homoglyph"]
    assert presets["homoglyph"].a.replace("Кo", "Ко") == presets["homoglyph"].a  # looks the same
    assert len(glyph[0]) != len(glyph[1])  # but the token count changes


def test_edit_inputs_validates_once_at_the_edge():
    inputs = edit_inputs("a", "b", 4, "sha256", "", 8)
    assert inputs == EditInputs("a", "b", 4, "sha256", None, 8) and hash(inputs) == hash(EditInputs("a", "b", 4, "sha256", None, 8))
    assert edit_inputs("a", "b") == EditInputs("a", "b")
    good = {"text_a": "a", "text_b": "b"}
    for bad, word in [({"text_a": " "}, "original prompt"), ({"text_b": b"x"}, "edited prompt"),
                      ({"block_size": 0}, "block size"), ({"block_size": True}, "block size"),
                      ({"hash_name": "md5"}, "md5"), ({"seed": 3}, "seed"), ({"max_tokens": 0}, "max_tokens")]:
        with pytest.raises(InputError, match=word):
            edit_inputs(**{**good, **bad})


def test_cli_help_lists_the_keys_in_order():
    """The ``reuse`` description names every key of ``CLI_KEYS``, in output order (the schema's doc)."""
    from kvviz.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command" or getattr(a, "choices", None))
    text = " ".join(sub.choices["reuse"].description.split())
    listed = re.findall(r"\b([a-z0-9]+(?:_[a-z0-9]+)+)\b", text.split("Prints exactly:")[1])
    assert tuple(dict.fromkeys(listed)) == CLI_KEYS


def test_cli_prints_exactly_the_listed_keys(capsys):
    code = cli_main(["reuse", "--a", SENTENCE, "--b", SENTENCE[:-1] + "?", "--block-size", "4", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert tuple(out) == CLI_KEYS
    assert out["reused_tokens"] + out["recomputed_tokens"] == out["num_tokens_b"]
    assert out["logits_max_abs_diff_wrong_reuse"] is None and out["kl_wrong_reuse"] is None
    assert out["next_token_changed_wrong_reuse"] is None
    assert out["logits_max_abs_diff_reuse"] < 1e-3 and out["full_prefill_ms"] > 0


def test_cli_errors_are_one_line(capsys):
    assert cli_main(["reuse", "--a", " ", "--b", "x", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "empty" in err
    assert cli_main(["reuse", "--a", "x", "--b", "y", "--block-size", "999"]) == 2
    assert cli_main(["reuse", "--a", "x", "--b", "y", "--hash", "md5"]) == 2


def test_next_token_piece_shows_split_bytes_as_escapes(lm):
    """reuse's one-token display shares tokens.byte_decoder: a token holding only the first byte of a
    multi-byte character shows as <0xNN>, a whole character as itself."""
    from kvviz.model.tokens import byte_decoder

    assert sorted(byte_decoder().values()) == list(range(256))
    split = next(i for i, t in enumerate(lm.tokenizer.convert_ids_to_tokens(list(range(len(lm.tokenizer)))))
                 if t and len(t) == 1 and byte_decoder().get(t, 0) >= 0xF0)
    assert re.fullmatch(r"<0xF[0-9A-F]>", piece_text(lm, split))
    assert piece_text(lm, lm.tokenizer.convert_tokens_to_ids("Ġcache")) == " cache"
