"""Reading Hugging Face config.json: every listed family, nesting, head_dim, layer kinds, errors."""

from __future__ import annotations

import json

import pytest

from kvviz.analysis.sizes.hf_config import (
    ERROR_CODES,
    MAX_CONFIG_BYTES,
    NOTE_CODES,
    ConfigError,
    load_config_file,
    parse_config,
    parse_config_text,
)
from kvviz.analysis.sizes.kv_formula import bytes_per_token, total_bytes
from kvviz.analysis.sizes.kvsize import MLA, LayerKind
from kvviz.analysis.sizes.presets import CONFIG_DIR
from kvviz.config_words import config_note, size_error

# (file, family, attention, layers, kv_layers, kv_heads, head_dim, fp16 bytes per token)
SHIPPED = [
    ("llama-2-7b.json", "llama", "MHA", 32, 32, 32, 128, 524_288),
    ("llama-3-8b.json", "llama", "GQA", 32, 32, 8, 128, 131_072),
    ("smollm2-135m.json", "llama", "GQA", 30, 30, 3, 64, 23_040),
    ("mistral-7b-v0.1.json", "mistral", "GQA", 32, 32, 8, 128, 131_072),
    ("mixtral-8x7b.json", "mixtral", "GQA", 32, 32, 8, 128, 131_072),
    ("qwen2.5-7b-instruct.json", "qwen2", "GQA", 28, 28, 4, 128, 57_344),
    ("qwen3-8b.json", "qwen3", "GQA", 36, 36, 8, 128, 147_456),
    ("qwen3-30b-a3b.json", "qwen3_moe", "GQA", 48, 48, 4, 128, 98_304),
    ("qwen3-next-80b-a3b.json", "qwen3_next", "GQA", 48, 12, 2, 256, 24_576),
    ("qwen3.6-35b-a3b.json", "qwen3_5_moe", "GQA", 40, 10, 2, 256, 20_480),
    ("qwen3.6-27b.json", "qwen3_5", "GQA", 64, 16, 4, 256, 65_536),
    ("gemma-2-9b.json", "gemma2", "GQA", 42, 42, 8, 256, 344_064),
    ("gemma-3-12b-it.json", "gemma3", "GQA", 48, 48, 8, 256, 393_216),
    ("phi-3-mini-4k-instruct.json", "phi3", "MHA", 32, 32, 32, 96, 393_216),
    ("falcon-7b.json", "falcon", "MQA", 32, 32, 1, 64, 8_192),
    ("falcon-40b.json", "falcon", "GQA", 60, 60, 8, 64, 122_880),
    ("gpt2.json", "gpt2", "MHA", 12, 12, 12, 64, 36_864),
    ("gpt-neox-20b.json", "gpt_neox", "MHA", 44, 44, 64, 96, 1_081_344),
    ("starcoder.json", "gpt_bigcode", "MQA", 40, 40, 1, 128, 20_480),
    ("jamba-v0.1.json", "jamba", "GQA", 32, 4, 8, 128, 16_384),
    ("deepseek-v2-lite.json", "deepseek_v2", "MLA", 27, 27, 1, 192, 31_104),
    ("deepseek-v3.json", "deepseek_v3", "MLA", 61, 61, 1, 192, 70_272),
]


@pytest.mark.parametrize(("name", "family", "attention", "layers", "kv_layers", "kv_heads", "head_dim", "bpt"), SHIPPED)
def test_shipped_config_for_each_family(name, family, attention, layers, kv_layers, kv_heads, head_dim, bpt):
    parsed = load_config_file(CONFIG_DIR / name)
    s = parsed.shape
    assert parsed.family == family
    assert (s.attention, s.num_layers, s.num_kv_layers, s.num_kv_heads, s.head_dim) == (
        attention, layers, kv_layers, kv_heads, head_dim)
    assert bytes_per_token(s, "fp16") == bpt


def test_every_shipped_config_is_tested():
    assert {n for n, *_ in SHIPPED} == {p.name for p in CONFIG_DIR.glob("*.json")}


def _cfg(**fields):
    return json.dumps(fields)


def _codes(parsed):
    return [n.code for n in parsed.notes]


def test_nested_text_config_is_read_and_sparse_fields_take_family_defaults():
    parsed = load_config_file(CONFIG_DIR / "gemma-3-12b-it.json")
    s = parsed.shape
    assert parsed.model_type == "gemma3_text"
    assert parsed.notes[0].code == "nested_config" and parsed.notes[0].params["key"] == "text_config"
    assert "default_head_dim" in _codes(parsed)
    # The view words the codes (English here; kvviz_app.calculator.text_config).
    assert "text_config" in config_note(parsed.notes[0])
    assert any("head_dim not in config" in config_note(n) for n in parsed.notes)
    assert (s.num_full_layers, s.num_sliding_layers, s.sliding_window) == (8, 40, 1024)
    assert [i for i, k in enumerate(s.layer_kinds) if k == LayerKind.FULL] == list(range(5, 48, 6))
    assert total_bytes(s, "bf16", 32_768) == 2 * 8 * 256 * 2 * (8 * 32_768 + 40 * 1024)
    assert parsed.config_dtype == "bf16"


def test_explicit_head_dim_beats_hidden_over_heads():
    parsed = parse_config_text(_cfg(model_type="qwen3", num_hidden_layers=2, num_attention_heads=32,
                                    num_key_value_heads=4, hidden_size=2048, head_dim=128))
    assert parsed.shape.head_dim == 128
    assert "explicit_head_dim" in _codes(parsed)
    derived = parse_config_text(_cfg(model_type="llama", num_hidden_layers=2, num_attention_heads=32, hidden_size=4096))
    assert derived.shape.head_dim == 128 and derived.shape.num_kv_heads == 32
    assert _codes(derived) == ["no_kv_heads"] and "MHA" in config_note(derived.notes[0])


def test_layer_types_with_sliding_and_full():
    parsed = parse_config_text(_cfg(model_type="gemma3_text", num_hidden_layers=4, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=16, sliding_window=8,
                                    layer_types=["sliding_attention", "full_attention", "sliding_attention",
                                                 "full_attention"]))
    s = parsed.shape
    assert s.layer_kinds == (LayerKind.SLIDING, LayerKind.FULL, LayerKind.SLIDING, LayerKind.FULL)
    per = 2 * 2 * 16 * 2
    assert total_bytes(s, "fp16", 100) == per * (2 * 100 + 2 * 8)


def test_qwen2_use_sliding_window_and_max_window_layers():
    base = dict(model_type="qwen2", num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                hidden_size=256, sliding_window=32, max_window_layers=4)
    off = parse_config_text(_cfg(**base, use_sliding_window=False)).shape
    assert off.num_sliding_layers == 0
    on = parse_config_text(_cfg(**base, use_sliding_window=True)).shape
    assert on.layer_kinds == (LayerKind.FULL,) * 4 + (LayerKind.SLIDING,) * 2 and on.sliding_window == 32


def test_mistral_sliding_window_applies_to_every_layer_unless_null():
    on = load_config_file(CONFIG_DIR / "mistral-7b-v0.1.json").shape
    assert on.num_sliding_layers == 32 and on.sliding_window == 4096
    off = load_config_file(CONFIG_DIR / "mixtral-8x7b.json").shape
    assert off.num_sliding_layers == 0


def test_qwen3_next_layer_types_from_full_attention_interval():
    parsed = parse_config_text(_cfg(model_type="qwen3_next", num_hidden_layers=8, num_attention_heads=16,
                                    num_key_value_heads=2, hidden_size=2048, full_attention_interval=2))
    s = parsed.shape
    assert s.head_dim == 256  # qwen3_next default
    assert s.layer_kinds == (LayerKind.STATE, LayerKind.FULL) * 4
    assert _codes(parsed)[-2:] == ["interval_pattern", "state_layers"]
    assert parsed.notes[-1].params == {"state": 4, "layers": 8}
    assert "Gated DeltaNet" in config_note(parsed.notes[-1]) and "2nd layer" in config_note(parsed.notes[-2])


def test_falcon_variants():
    mq = parse_config_text(_cfg(model_type="falcon", num_hidden_layers=2, num_attention_heads=8, hidden_size=512,
                                num_kv_heads=8, multi_query=True)).shape
    assert mq.num_kv_heads == 1
    default = parse_config_text(_cfg(model_type="falcon", num_hidden_layers=2, num_attention_heads=8,
                                     hidden_size=512)).shape
    assert default.num_kv_heads == 1  # multi_query defaults to true
    mha = parse_config_text(_cfg(model_type="falcon", num_hidden_layers=2, num_attention_heads=8, hidden_size=512,
                                 multi_query=False)).shape
    assert mha.num_kv_heads == 8
    new = parse_config_text(_cfg(model_type="falcon", num_hidden_layers=2, num_attention_heads=8, hidden_size=512,
                                 new_decoder_architecture=True, num_kv_heads=2)).shape
    assert new.num_kv_heads == 2
    old = parse_config_text(_cfg(model_type="RefinedWebModel", n_layer=32, n_head=71, hidden_size=4544,
                                 multi_query=True)).shape
    assert (old.num_layers, old.num_heads, old.num_kv_heads, old.head_dim) == (32, 71, 1, 64)


def test_gpt_bigcode_without_multi_query_is_mha():
    s = parse_config_text(_cfg(model_type="gpt_bigcode", n_layer=2, n_head=4, n_embd=256, multi_query=False)).shape
    assert s.attention == "MHA"


def test_deepseek_mla_and_defaults():
    s = load_config_file(CONFIG_DIR / "deepseek-v3.json").shape
    assert s.mla == MLA(512, 64) and s.num_heads == 128 and s.d_model == 7168
    sparse = parse_config(dict(model_type="deepseek_v3", num_hidden_layers=2, num_attention_heads=4, hidden_size=64))
    assert sparse.shape.mla == MLA(512, 64)
    assert _codes(sparse) == ["mla_default_rank", "mla_default_rope", "mla_latent"]
    assert sum("default" in config_note(n) for n in sparse.notes) == 2
    plain = parse_config(dict(model_type="deepseek_v2", num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=4, hidden_size=64, kv_lora_rank=None))
    assert plain.shape.mla is None and plain.shape.attention == "MHA"


def test_unknown_model_type_falls_back_and_says_so():
    parsed = parse_config(dict(model_type="brand_new_lm", num_hidden_layers=4, num_attention_heads=8,
                               num_key_value_heads=2, hidden_size=512))
    assert parsed.family == "generic"
    assert bytes_per_token(parsed.shape, "fp16") == 2 * 4 * 2 * 64 * 2
    assert parsed.notes[0].code == "unknown_model_type" and parsed.notes[0].params == {"model_type": "brand_new_lm"}
    assert "not one kvviz knows" in config_note(parsed.notes[0]) and "brand_new_lm" in config_note(parsed.notes[0])
    missing = parse_config(dict(num_hidden_layers=1, num_attention_heads=1, hidden_size=8))
    assert missing.family == "generic" and missing.notes[0].code == "missing_model_type"
    assert "no model_type" in config_note(missing.notes[0])


def test_every_note_is_a_code_with_plain_params_and_words():
    """The library speaks codes: each note of every shipped config is a known code whose params are numbers or
    strings, and the view has words for it."""
    for path in CONFIG_DIR.glob("*.json"):
        for note in load_config_file(path).notes:
            assert note.code in NOTE_CODES
            assert all(isinstance(v, (int, str)) for v in note.params.values()), note
            assert config_note(note) and "{" not in config_note(note)


# --- errors: one line each ---------------------------------------------------------------------

# (text, ConfigError code, wrapped kvsize reason or None, a fragment of its English words)
BAD = [
    ("", "empty", None, "empty"),
    ("   \n", "empty", None, "empty"),
    ('{"model_type": "llama", "num_hidden_layers": 32', "invalid_json", None, "not valid JSON"),
    ("[1, 2, 3]", "not_object", None, "JSON object"),
    ('"text"', "not_object", None, "JSON object"),
    ("{}", "missing_field", None, "layer count"),
    (_cfg(model_type="llama", num_hidden_layers=32), "missing_field", None, "attention head count"),
    (_cfg(model_type="llama", num_hidden_layers=0, num_attention_heads=8, hidden_size=64), "bad_value",
     "not_positive", "positive"),
    (_cfg(model_type="llama", num_hidden_layers=-3, num_attention_heads=8, hidden_size=64), "bad_value",
     "not_positive", "positive"),
    (_cfg(model_type="llama", num_hidden_layers="32", num_attention_heads=8, hidden_size=64), "bad_value",
     "not_whole", "whole number"),
    (_cfg(model_type="llama", num_hidden_layers=True, num_attention_heads=8, hidden_size=64), "bad_value",
     "not_whole", "whole number"),
    (_cfg(model_type="llama", num_hidden_layers=2.5, num_attention_heads=8, hidden_size=64), "bad_value",
     "not_whole", "whole number"),
    (_cfg(model_type="llama", num_hidden_layers=10**12, num_attention_heads=8, hidden_size=64), "bad_value",
     "absurd", "absurd"),
    (_cfg(model_type="llama", num_hidden_layers=2, num_attention_heads=8, hidden_size=100), "hidden_not_divisible",
     None, "not divisible"),
    (_cfg(model_type="llama", num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=16,
          hidden_size=64), "bad_shape", "kv_exceeds_heads", "cannot exceed"),
    (_cfg(model_type="llama", num_hidden_layers=2, num_attention_heads=8), "no_head_dim", None, "head_dim"),
    (_cfg(model_type="gemma3_text", num_hidden_layers=2, num_attention_heads=2, head_dim=8,
          layer_types=["full_attention"]), "layer_types_length", None, "layer_types has 1 entries"),
    (_cfg(model_type="gemma3_text", num_hidden_layers=1, num_attention_heads=2, head_dim=8,
          layer_types=["teleport_attention"]), "layer_type_unknown", None, "layer_types[0]"),
    (_cfg(model_type="llama", num_hidden_layers=1, num_attention_heads=2, head_dim=8,
          layer_types=["sliding_attention"]), "sliding_no_window", None, "sliding_window is not set"),
    (_cfg(model_type="falcon", num_hidden_layers=1, num_attention_heads=2, hidden_size=8,
          multi_query="yes"), "not_bool", None, "true or false"),
]


@pytest.mark.parametrize(("text", "code", "reason", "fragment"), BAD)
def test_bad_configs_give_one_line_errors(text, code, reason, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config_text(text)
    exc = info.value
    assert exc.code == code and exc.code in ERROR_CODES
    assert exc.params.get("reason") == reason
    message = size_error(exc)
    assert fragment in message and "\n" not in message and "{" not in message.replace("({...})", "")


def _error(fn, *args):
    with pytest.raises(ConfigError) as info:
        fn(*args)
    return info.value


def test_huge_config_is_refused():
    big = '{"pad": "' + "x" * MAX_CONFIG_BYTES + '"}'
    for text in (big, big.encode()):
        exc = _error(parse_config_text, text)
        assert exc.code == "too_big" and "limit is 1 MiB" in size_error(exc)


def test_huge_config_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    exc = _error(load_config_file, path)
    assert exc.code == "too_big" and "limit is 1 MiB" in size_error(exc)


def test_binary_and_non_utf8_and_missing_files(tmp_path):
    cases = [
        (parse_config_text, b"\x89PNG\r\n\x1a\n\x00\x00", "binary", "binary"),
        (parse_config_text, b'{"a": "\xff\xfe"}', "not_utf8", "UTF-8"),
        (load_config_file, tmp_path / "missing.json", "no_file", "no such file"),
        (load_config_file, tmp_path, "is_dir", "directory"),
    ]
    for fn, arg, code, words in cases:
        exc = _error(fn, arg)
        assert exc.code == code and words in size_error(exc), (code, size_error(exc))


def test_deeply_nested_json_is_an_error_not_a_crash():
    with pytest.raises(ConfigError):
        parse_config_text("[" * 100_000 + "]" * 100_000)
