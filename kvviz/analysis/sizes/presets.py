"""Calculator presets: well-known models, each read from an example config.json with its source.

A preset is data: a key, a label, the config file in ``assets/configs/`` its numbers come from, a
sentence naming the source, and (for the articles' examples) the figure the articles print. The
shape is always derived by ``hf_config`` from the file, so presets and uploaded configs go through
the same reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from kvviz.analysis.sizes.hf_config import ParsedConfig, load_config_file
from kvviz.analysis.sizes.kvsize import KVSizeError, ModelShape

CONFIG_DIR = Path(__file__).resolve().parents[3] / "assets" / "configs"


@dataclass(frozen=True)
class Preset:
    """A named model whose shape comes from ``CONFIG_DIR / config_file``."""

    key: str
    label: str
    config_file: str
    source: str
    """Where the numbers come from, in one or two sentences."""
    article_bytes_per_token: int | None = None
    """The articles' per-token figure (fp16, every layer counted), when the articles cite this model."""
    article_note: str = ""
    """How the articles' figure relates to the config-exact one."""

    @property
    def path(self) -> Path:
        return CONFIG_DIR / self.config_file

    def parsed(self) -> ParsedConfig:
        return _parse(self.config_file)

    def shape(self) -> ModelShape:
        """The model shape, read from the config file; its name is the preset label."""
        s = self.parsed().shape
        return ModelShape(
            name=self.label, num_layers=s.num_layers, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads,
            head_dim=s.head_dim, d_model=s.d_model, layer_kinds=s.layer_kinds,
            sliding_window=s.sliding_window, mla=s.mla, notes=s.notes,
        )


@cache
def _parse(config_file: str) -> ParsedConfig:
    return load_config_file(CONFIG_DIR / config_file)


PRESETS: tuple[Preset, ...] = (
    Preset(
        "llama-2-7b", "Llama-2-7B", "llama-2-7b.json",
        "meta-llama/Llama-2-7b-hf config.json; the articles' worked example (32 layers, 32 KV heads, "
        "head_dim 128, fp16).",
        article_bytes_per_token=524_288,
        article_note="MHA: every layer caches K/V, so the articles' figure is the config-exact one.",
    ),
    Preset(
        "qwen3.6-27b", "Qwen3.6-27B", "qwen3.6-27b.json",
        "Qwen3.6-27B reuses the Qwen3.5-27B architecture (qwen3_5); numbers from public notes on that "
        "config: 64 layers = 48 Gated DeltaNet + 16 full attention, 24 query heads, 4 KV heads, head_dim "
        "256. Assumed, not read from Qwen3.6-27B's own config.json.",
        article_bytes_per_token=262_144,
        article_note="The articles count all 64 layers (256 KiB). Only every 4th layer is full attention; "
        "the 48 Gated DeltaNet layers keep a fixed-size state instead, so the config-exact per-token KV "
        "is a quarter of that.",
    ),
    Preset(
        "qwen3.6-35b-a3b", "Qwen3.6-35B-A3B", "qwen3.6-35b-a3b.json",
        "Qwen/Qwen3.6-35B-A3B config.json (qwen3_5_moe, nested text_config): 40 layers, layer_types "
        "3 x linear_attention + 1 x full_attention, 2 KV heads, head_dim 256.",
        article_bytes_per_token=81_920,
        article_note="The articles count all 40 layers (80 KiB). Only the 10 full-attention layers keep "
        "per-token K/V; the 30 Gated DeltaNet layers keep a fixed-size state, so the config-exact figure "
        "is 20 KiB.",
    ),
    Preset(
        "smollm2-135m", "SmolLM2-135M (embedded)", "smollm2-135m.json",
        "HuggingFaceTB/SmolLM2-135M-Instruct config.json, the model kvviz runs: 30 layers, 9 query heads, "
        "3 KV heads, head_dim 64.",
    ),
    Preset("llama-3-8b", "Llama-3-8B", "llama-3-8b.json",
           "meta-llama/Meta-Llama-3-8B config.json: GQA, 32 query heads share 8 KV heads."),
    Preset("mistral-7b", "Mistral-7B-v0.1", "mistral-7b-v0.1.json",
           "mistralai/Mistral-7B-v0.1 config.json: GQA 32/8, a 4,096-token sliding window on every layer."),
    Preset("gpt2", "GPT-2 (124M)", "gpt2.json",
           "openai-community/gpt2 config.json: MHA, 12 layers, 12 heads, n_embd 768."),
    Preset("falcon-7b", "Falcon-7B (MQA)", "falcon-7b.json",
           "tiiuae/falcon-7b config.json: multi_query, 71 query heads share a single KV head."),
    Preset("deepseek-v3", "DeepSeek-V3 (MLA)", "deepseek-v3.json",
           "deepseek-ai/DeepSeek-V3 config.json: MLA, 61 layers, one latent of kv_lora_rank 512 + "
           "qk_rope_head_dim 64 per layer per token."),
    Preset("gemma-2-9b", "Gemma-2-9B", "gemma-2-9b.json",
           "google/gemma-2-9b config.json: 42 layers alternating 4,096-token sliding window and global "
           "attention, GQA 16/8, head_dim 256."),
    Preset("qwen3-next-80b-a3b", "Qwen3-Next-80B-A3B", "qwen3-next-80b-a3b.json",
           "Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 48 layers, full attention every 4th layer "
           "(Gated DeltaNet elsewhere), 2 KV heads, head_dim 256."),
)

PRESETS_BY_KEY: dict[str, Preset] = {p.key: p for p in PRESETS}

EXAMPLE_CONFIGS: tuple[str, ...] = tuple(sorted(p.name for p in CONFIG_DIR.glob("*.json")))
"""Every example config.json shipped in assets/configs (one or more per supported family)."""


def get_preset(key: str) -> Preset:
    """The preset named ``key`` (case-insensitive), or a KVSizeError listing the names."""
    preset = PRESETS_BY_KEY.get(key.strip().lower())
    if preset is None:
        raise KVSizeError(f"unknown preset {key!r}; choose one of: {', '.join(PRESETS_BY_KEY)}")
    return preset


def example_config_text(file_name: str) -> str:
    """The text of one shipped example config.json (for the page's 'load an example' choice)."""
    if file_name not in EXAMPLE_CONFIGS:
        raise KVSizeError(f"no example config named {file_name!r}")
    return (CONFIG_DIR / file_name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class ArticleCheck:
    """One figure the source articles print, recomputed by kvviz from the preset's config."""

    code: str
    """Which figure of the articles (the view's text: kvviz_app.calculator.text.ARTICLE_CLAIMS / ARTICLE_NOTES)."""
    computed_bytes: int
    """What kvviz computes, exactly."""
    stated_bytes: int
    """The articles' number in bytes (their rounding, if any, undone as stated)."""
    params: dict[str, int] = field(default_factory=dict)
    """Numbers the note quotes (bytes, layer counts)."""

    @property
    def exact(self) -> bool:
        """True when the articles' number is reproduced to the byte."""
        return self.computed_bytes == self.stated_bytes


def article_checks() -> list[ArticleCheck]:
    """The articles' per-token and total figures, recomputed (fp16, as the articles assume)."""
    from kvviz.analysis.sizes.kv_formula import all_layers_bytes_per_token, bytes_per_token, total_bytes
    from kvviz.util.units import GIB

    llama = get_preset("llama-2-7b").shape()
    q27 = get_preset("qwen3.6-27b").shape()
    q35 = get_preset("qwen3.6-35b-a3b").shape()
    per_token = int(bytes_per_token(llama, "fp16"))
    one_k = total_bytes(llama, "fp16", 1000)
    hundred = total_bytes(llama, "fp16", 1000, 100)
    return [
        ArticleCheck("llama_per_token", per_token, 524_288),
        ArticleCheck("llama_1k", one_k, 500 << 20),
        ArticleCheck("llama_100x1k", hundred, 50 * GIB, {"bytes": hundred}),
        ArticleCheck("qwen27_per_token", int(all_layers_bytes_per_token(q27, "fp16")), 256 << 10,
                     {"full_layers": q27.num_full_layers, "bytes": int(bytes_per_token(q27, "fp16"))}),
        ArticleCheck("qwen35_per_token", int(all_layers_bytes_per_token(q35, "fp16")), 80 << 10,
                     {"full_layers": q35.num_full_layers, "bytes": int(bytes_per_token(q35, "fp16"))}),
    ]
