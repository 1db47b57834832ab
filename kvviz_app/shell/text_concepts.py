"""The app's words for the engine mirror's and the simulations' reason codes: the library's English lines
(kvviz.words, which the CLI prints) are the msgids; a view of this module reads them translated, and its
``render_*`` helpers word a code in the view's language."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvviz import words as _en
from kvviz.words import (
    BLOCK_REASON_TEXT,
    EVENT_ALLOCATE,
    EVENT_ALLOCATE_NONE,
    EVENT_CACHE,
    EVENT_EVICT,
    EVENT_FREE,
    EVENT_FREE_WINDOW,
    EVENT_HIT,
    EVENT_HOST_EVICT,
    EVENT_HOST_LOAD,
    EVENT_HOST_STORE,
    EVENT_HOST_STORE_HELD,
    EVENT_HOST_STORE_SKIPPED,
    EVENT_MISS,
    EVENT_MISS_CAPPED,
    EVENT_MISS_HOST,
    EVENT_REFUSE,
    EVENT_RESET,
    EVENT_RESET_REFUSED,
    EVENT_TEXT,
    EVENT_TOUCH,
    REASON_HIT,
    REASON_HIT_CAPPED,
    REASON_INVALIDATED_CHAIN,
    REASON_INVALIDATED_CHAIN_SALT,
    REASON_INVALIDATED_SALT,
    REASON_MISS_NO_BLOCK,
    REASON_MISS_TOKENS,
    REASON_PARTIAL,
    SEED_IN_FORCE,
    SEED_RANDOM_SHOWN,
    SEED_REASON_TEXT,
    STEP_ERROR_TEXT,
)

if TYPE_CHECKING:
    from kvviz_app.shell.i18n.texts import Texts

__all__ = ['BLOCK_REASON_TEXT', 'EVENT_ALLOCATE', 'EVENT_ALLOCATE_NONE', 'EVENT_CACHE', 'EVENT_EVICT', 'EVENT_FREE', 'EVENT_FREE_WINDOW', 'EVENT_HIT', 'EVENT_HOST_EVICT', 'EVENT_HOST_LOAD', 'EVENT_HOST_STORE', 'EVENT_HOST_STORE_HELD', 'EVENT_HOST_STORE_SKIPPED', 'EVENT_MISS', 'EVENT_MISS_CAPPED', 'EVENT_MISS_HOST', 'EVENT_REFUSE', 'EVENT_RESET', 'EVENT_RESET_REFUSED', 'EVENT_TEXT', 'EVENT_TOUCH', 'REASON_HIT', 'REASON_HIT_CAPPED', 'REASON_INVALIDATED_CHAIN', 'REASON_INVALIDATED_CHAIN_SALT', 'REASON_INVALIDATED_SALT', 'REASON_MISS_NO_BLOCK', 'REASON_MISS_TOKENS', 'REASON_PARTIAL', 'SEED_IN_FORCE', 'SEED_RANDOM_SHOWN', 'SEED_REASON_TEXT', 'STEP_ERROR_TEXT', "NULL_BLOCK_HOVER",
           "render_block_reason", "render_event", "render_seed", "render_step_error"]

NULL_BLOCK_HOVER = (
    "Block 0 is vLLM's null block: reserved when the pool starts, never allocated, never in the free "
    "queue and not counted in usage. It stands in for blocks a sliding window skipped."
)


def render_event(t: Texts, code: str, params: dict[str, Any]) -> str:
    """The sentence for one block-pool event's reason code, in the view's language."""
    return _en.render_event(code, params, t)


def render_step_error(t: Texts, code: str, params: dict[str, Any]) -> str:
    """The sentence for a refused or skipped trace step, in the view's language."""
    return _en.render_step_error(code, params, t)


def render_block_reason(t: Texts, code: str, params: dict[str, Any]) -> str:
    """The sentence for one compared block's reason code, in the view's language."""
    return _en.render_block_reason(code, params, t)


def render_seed(t: Texts, seed: str, reason: str, algo: str) -> str:
    """Which NONE_HASH seed is in force and why, in the view's language."""
    return _en.render_seed(seed, reason, algo, t)
