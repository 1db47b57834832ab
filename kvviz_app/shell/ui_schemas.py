"""The shareable state of each page: {URL param: Param(session_state key, parser, default, dumper)}.

One place for every page's link format, so the pages gain two calls each (``ui_share.restore`` and
``ui_share.sync``). A default of None means "always written" (it depends on other state, e.g. a preset's
block size). Values are validated here, at the edge; the pages trust session_state afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvviz.analysis.paging.experiment import RESERVATION_POLICIES, PagingConfig
from kvviz.analysis.providers import DEFAULT_POLICY, POLICIES
from kvviz.analysis.scenarios.load import builtin_names
from kvviz.analysis.scenarios.records import HOST_TIER_CHOICES
from kvviz.analysis.sizes import kv_capacity, kvsize
from kvviz.analysis.sizes.presets import PRESETS
from kvviz.experiments.sessions import DEFAULT_PAUSE_S, MARKS, MAX_PAUSE_S, MAX_TURNS
from kvviz.mirror import limits
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, HASH_FUNCTIONS
from kvviz.mirror.host_arc import EVICTION_POLICIES
from kvviz_app.shell import share as S
from kvviz_app.shell.share import Param

MAX_PROMPT_CHARS = 6000  # a link carries at most this much of each prompt (longer ones stay out of it)


def edit(preset_ids: Iterable[str], block_sizes: Iterable[int], modes: dict[str, str]) -> dict[str, Param]:
    """Edit one character: mode, preset, the one-character edit or both prompts, block size, hash, seed."""
    mode_parse, mode_dump = S.coded(modes)
    return {
        "mode": Param("edit_mode", mode_parse, None, mode_dump),
        "preset": Param("edit_preset", S.choice(list(preset_ids))),
        "text": Param("edit_char_text", S.text(MAX_PROMPT_CHARS), None, S.dump_text(MAX_PROMPT_CHARS)),
        "pos": Param("edit_char_pos", S.integer(0, MAX_PROMPT_CHARS)),
        "repl": Param("edit_char_repl", S.text(1)),
        "a": Param("edit_free_a", S.text(MAX_PROMPT_CHARS), None, S.dump_text(MAX_PROMPT_CHARS)),
        "b": Param("edit_free_b", S.text(MAX_PROMPT_CHARS), None, S.dump_text(MAX_PROMPT_CHARS)),
        "block": Param("edit_block_size", S.choice(list(block_sizes))),
        "hash": Param("edit_hash", S.choice(list(HASH_FUNCTIONS)), DEFAULT_HASH),
        "seed": Param("edit_seed", S.text(64), DEFAULT_SEED or ""),  # empty: no seed
    }


def calculator(modes: dict[str, str], contexts: list[int], blocks: list[int], reserves: list[float]) -> dict[str, Param]:
    """KV-bytes calculator: preset or typed numbers, dtype, tokens, batch, budget, block, reserve."""
    mode_parse, mode_dump = S.coded(modes)
    budget_parse, budget_dump = S.coded({**{str(b): b for b in kv_capacity.GPU_BUDGETS_GIB}, "custom": None})
    return {
        "mode": Param("calc_mode", mode_parse, None, mode_dump),
        "preset": Param("calc_preset", S.choice([p.key for p in PRESETS]), PRESETS[0].key),
        "layers": Param("calc_layers", S.integer(1, kvsize.MAX_LAYERS), 32),
        "heads": Param("calc_heads", S.integer(1, kvsize.MAX_HEADS), 32),
        "kv_heads": Param("calc_kv_heads", S.integer(1, kvsize.MAX_HEADS), 8),
        "head_dim": Param("calc_head_dim", S.integer(1, kvsize.MAX_HEAD_DIM), 128),
        "d_model": Param("calc_d_model", S.integer(0, kvsize.MAX_D_MODEL), 0),
        "sliding": Param("calc_sliding", S.flag, False, S.dump_flag),
        "window": Param("calc_window", S.integer(1, 1 << 30), 4096),
        "mla": Param("calc_mla", S.flag, False, S.dump_flag),
        "rank": Param("calc_rank", S.integer(1, kvsize.MAX_HEAD_DIM), 512),
        "rope": Param("calc_rope", S.integer(0, kvsize.MAX_HEAD_DIM), 64),
        "dtype": Param("calc_dtype", S.choice(list(kvsize.DTYPES)), list(kvsize.DTYPES)[1]),
        "tokens": Param("calc_context", S.choice(contexts), 1000),
        "batch": Param("calc_batch", S.integer(1, 1024), 100),
        "budget": Param("calc_budget", budget_parse, kv_capacity.GPU_BUDGETS_GIB[1], budget_dump),
        "gib": Param("calc_budget_custom", S.number(0.01, 1_000_000.0), 40.0, S.dump_number),
        "block": Param("calc_block", S.choice(blocks), limits.DEFAULT_BLOCK_SIZE),
        "reserve": Param("calc_reserve", S.choice(reserves), 4.0, S.dump_number),
    }


def block_table() -> dict[str, Param]:
    """Block table player: scenario, host tier (blocks, 0 = none) and its eviction policy, and step (clamped to
    the scenario's length later)."""
    return {
        "scenario": Param("bt_name", S.choice(builtin_names())),
        "host": Param("bt_host", S.choice(HOST_TIER_CHOICES), 0),
        "host_policy": Param("bt_host_policy", S.choice(EVICTION_POLICIES), "lru"),
        "step": Param("bt_step", S.integer(0, 100_000), 0),
    }


def paging(memories: list[int], blocks: list[int], max_lens: list[int]) -> dict[str, Param]:
    """Paged vs contiguous: the workload and memory settings, and the step shown."""
    d = PagingConfig()
    return {
        "memory": Param("pg_memory", S.choice(memories), d.memory_tokens),
        "block": Param("pg_block", S.choice(blocks), d.block_size),
        "requests": Param("pg_requests", S.integer(1, 300), d.num_requests),
        "prefix": Param("pg_prefix", S.integer(0, 1024), d.shared_prefix),
        "prompt": Param("pg_prompt", S.int_pair(1, 2048), (d.prompt_min, d.prompt_max), S.dump_pair),
        "output": Param("pg_output", S.int_pair(1, 2048), (d.output_min, d.output_max), S.dump_pair),
        "max_len": Param("pg_max_len", S.choice(max_lens), d.max_model_len),
        "seed": Param("pg_seed", S.integer(0, 10_000), d.seed),
        "reservation": Param("pg_reservation", S.choice(list(RESERVATION_POLICIES)), d.reservation),
        "sharing": Param("pg_sharing", S.flag, d.share_prefix, S.dump_flag),
        "step": Param("pg_step", S.integer(0, 1_000_000)),
    }


def radix(windows: list[int], page_sizes: list[int]) -> dict[str, Param]:
    """Radix tree vs hash chain: scenario, window, page size, step."""
    return {
        "scenario": Param("rx_name", S.choice(builtin_names())),
        "window": Param("rx_window", S.choice(windows), 32),
        "page": Param("rx_page", S.choice(page_sizes), page_sizes[0]),
        "step": Param("rx_step", S.integer(0, 100_000)),
    }


#: The Sessions page's events: {link name: (event name, link name of its turn or None)}.
SESSION_EVENTS = {"restart": ("restart_tools", "restart_turn"), "file": ("file_read", "file_turn"),
                  "pause": ("long_pause", "pause_turn"), "json": ("unstable_json", None)}


def session_event_key(event: str) -> str:
    """The session_state key of an event's switch."""
    return f"ss_ev_{event}"


def session_turn_key(event: str) -> str:
    """The session_state key of the turn an event lands on (one for every session: the page clamps it)."""
    return f"ss_turn_{event}"


def sessions(examples: list[str]) -> dict[str, Param]:
    """Multi-turn sessions: the example session, the provider policy, its checkpoints and minimum length,
    the events with their turns and the pause (every input of the page's numbers), the projection length."""
    marks_parse, marks_dump = S.subset(MARKS)
    schema = {
        "session": Param("ss_session", S.choice(examples), examples[0] if examples else None,
                         lambda name: S.choice(examples)(name) and name),  # an upload has no link form
        "policy": Param("ss_policy", S.choice(list(POLICIES)), DEFAULT_POLICY),
        "marks": Param("ss_marks", marks_parse, list(MARKS), marks_dump),
        "min": Param("ss_min", S.integer(0, 8192)),
        "turns": Param("ss_project", S.integer(5, 200), 50),
        "pause_min": Param("ss_pause_min", S.number(0.0, MAX_PAUSE_S / 60), DEFAULT_PAUSE_S / 60, S.dump_number),
    }
    for name, (event, turn) in SESSION_EVENTS.items():
        schema[name] = Param(session_event_key(event), S.flag, False, S.dump_flag)
        if turn:
            schema[turn] = Param(session_turn_key(event), S.integer(2, MAX_TURNS))
    return schema
