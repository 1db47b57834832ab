"""``python -m kvviz bytes``: JSON output, the articles' figures, and every error path."""

from __future__ import annotations

import io
import json
import sys

import pytest

from kvviz.analysis.sizes import kv_formula
from kvviz.analysis.sizes.hf_config import MAX_CONFIG_BYTES
from kvviz.analysis.sizes.presets import CONFIG_DIR, PRESETS
from kvviz.cli import main
from kvviz.util import units


def run_json(capsys, *argv):
    code = main(["bytes", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


def run_error(capsys, *argv):
    code = main(["bytes", *argv])
    out, err = capsys.readouterr()
    assert code != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def test_llama2_article_figures(capsys):
    d, err = run_json(capsys, "--preset", "llama-2-7b", "--tokens", "1000", "--batch", "100")
    assert err == ""
    assert d["bytes_per_token"] == 524_288 and d["bytes_per_token_human"] == "512 KiB"
    assert d["naive_bytes_per_token"] == 524_288
    assert d["attention"] == "MHA" and d["num_kv_layers"] == 32
    assert d["request_bytes"] == 524_288_000
    assert d["total_bytes"] == 52_428_800_000 and d["total_human"] == "≈48.83 GiB"
    assert d["article_bytes_per_token"] == 524_288
    assert d["formula"] == "2 x 32 x 32 x 128 x 2 B = 524,288 B"


def test_hybrid_preset_reports_both_figures(capsys):
    d, _ = run_json(capsys, "--preset", "qwen3.6-35b-a3b")
    assert d["bytes_per_token"] == 20_480 and d["all_layers_bytes_per_token"] == 81_920
    assert d["article_bytes_per_token"] == 81_920 and d["all_layers_factor"] == 4.0
    assert (d["num_layers"], d["num_kv_layers"], d["num_state_layers"]) == (40, 10, 30)


def test_every_preset_matches_the_library(capsys):
    for preset in PRESETS:
        d, _ = run_json(capsys, "--preset", preset.key, "--dtype", "bf16")
        assert d["bytes_per_token"] == units.as_number(kv_formula.bytes_per_token(preset.shape(), "bf16"))


def test_typed_numbers_and_dtypes(capsys):
    d, _ = run_json(capsys, "--layers", "30", "--kv-heads", "3", "--head-dim", "64", "--heads", "9",
                    "--d-model", "576", "--dtype", "fp32")
    assert d["bytes_per_token"] == 46_080 and d["attention"] == "GQA" and d["naive_factor"] == 3.0
    d, _ = run_json(capsys, "--layers", "30", "--kv-heads", "3", "--head-dim", "64", "--dtype", "int4")
    assert d["bytes_per_token"] == 5_760 and d["attention"] == "MHA"


def test_typed_mla_and_window(capsys):
    d, _ = run_json(capsys, "--layers", "61", "--kv-heads", "1", "--head-dim", "192", "--heads", "128",
                    "--kv-lora-rank", "512", "--qk-rope-head-dim", "64", "--dtype", "bf16")
    assert d["attention"] == "MLA" and d["bytes_per_token"] == 70_272
    d, _ = run_json(capsys, "--layers", "2", "--kv-heads", "1", "--head-dim", "4", "--window", "10",
                    "--tokens", "100")
    assert d["num_sliding_layers"] == 2 and d["total_bytes"] == 2 * 2 * 1 * 4 * 2 * 10


def test_config_file_and_stdin(capsys, monkeypatch):
    d, _ = run_json(capsys, "--config", str(CONFIG_DIR / "gemma-3-12b-it.json"), "--tokens", "32768")
    assert d["family"] == "gemma3" and d["num_sliding_layers"] == 40
    assert d["total_bytes"] == 2 * 8 * 256 * 2 * (8 * 32768 + 40 * 1024)
    assert d["config_notes"][0] == "read the nested text_config (a multimodal config; model_type gemma3)"
    assert d["config_note_codes"][0] == {"code": "nested_config", "params": {"key": "text_config", "model_type": "gemma3"}}
    assert len(d["config_note_codes"]) == len(d["config_notes"])
    raw = (CONFIG_DIR / "falcon-7b.json").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    d, _ = run_json(capsys, "--config", "-")
    assert d["attention"] == "MQA" and d["bytes_per_token"] == 8_192


def test_capacity_and_paging(capsys):
    d, _ = run_json(capsys, "--preset", "llama-2-7b", "--tokens", "1000", "--batch", "100", "--budget-gib", "80",
                    "--max-len", "4000")
    assert d["bytes_per_block"] == 8 * 2**20 and d["blocks_per_request"] == 63
    assert d["capacity"]["max_tokens"] == 163_824  # 10,239 blocks: block 0 is the null block
    assert d["capacity"]["null_block_bytes"] == 8 * 2**20
    assert d["paging"]["contiguous_utilisation"] == 0.25
    assert d["paging"]["paper_utilisation_range"] == [0.204, 0.382]


def test_list_presets(capsys):
    d, _ = run_json(capsys, "--list-presets")
    assert [p["key"] for p in d["presets"]] == [p.key for p in PRESETS]
    assert all(p["source"] for p in d["presets"])


def test_human_output(capsys):
    assert main(["bytes", "--preset", "gpt2"]) == 0
    out = capsys.readouterr().out
    assert "bytes_per_token: 36864" in out and "attention: MHA" in out


def test_uneven_heads_warn_but_succeed(capsys):
    code = main(["bytes", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--heads", "30", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert err.startswith("warning:") and "not a multiple" in err
    assert "not a multiple" in json.loads(out)["warnings"][0]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--layers", "0", "--kv-heads", "8", "--head-dim", "128"], "layers must be positive"),
    (["--layers", "32", "--kv-heads", "-8", "--head-dim", "128"], "kv_heads must be positive"),
    (["--layers", "32", "--kv-heads", "8", "--head-dim", "0"], "head_dim must be positive"),
    (["--layers", "32", "--kv-heads", "9", "--head-dim", "64", "--heads", "8"], "cannot exceed"),
    (["--layers", "99999999", "--kv-heads", "8", "--head-dim", "64"], "absurd"),
    (["--preset", "llama-2-7b", "--tokens", "0"], "--tokens must be positive"),
    (["--preset", "llama-2-7b", "--batch", "-1"], "--batch must be positive"),
    (["--preset", "llama-2-7b", "--block-size", "0"], "--block-size: block size must be in 1..256, got 0"),
    (["--preset", "llama-2-7b", "--budget-gib", "0"], "--budget-gib"),
    (["--preset", "llama-2-7b", "--budget-gib", "nan"], "--budget-gib"),
    (["--preset", "llama-2-7b", "--max-len", "10", "--tokens", "100"], "max_len"),
    (["--preset", "llama-2-7b", "--dtype", "fp3"], "unknown dtype"),
    (["--preset", "nope"], "unknown preset"),
    (["--preset", "gpt2", "--layers", "2"], "give one model"),
    (["--preset", "gpt2", "--config", "x.json"], "give one model"),
    ([], "no model"),
    (["--layers", "2"], "missing --kv-heads, --head-dim"),
    (["--layers", "2", "--kv-heads", "1", "--head-dim", "4", "--qk-rope-head-dim", "64"], "needs --kv-lora-rank"),
    (["--layers", "x"], "invalid int value"),
    (["--config", "/nonexistent/config.json"], "no such file"),
])
def test_error_paths(capsys, argv, fragment):
    assert fragment in run_error(capsys, *argv)


def test_bad_config_files(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"model_type": "llama", "num_hidden_layers": 32', encoding="utf-8")
    assert "not valid JSON" in run_error(capsys, "--config", str(bad))
    huge = tmp_path / "huge.json"
    huge.write_text('{"x": "' + "y" * MAX_CONFIG_BYTES + '"}', encoding="utf-8")
    assert "limit is 1 MiB" in run_error(capsys, "--config", str(huge))
    binary = tmp_path / "weights.json"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    assert "binary" in run_error(capsys, "--config", str(binary))
    array = tmp_path / "array.json"
    array.write_text("[]", encoding="utf-8")
    assert "JSON object" in run_error(capsys, "--config", str(array))
