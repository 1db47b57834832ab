"""One room prompt from text or token ids: the path the room page, the ``room`` CLI and the concurrency
benchmark share. Text is tokenized whole with the engine's tokenizer (so the room reports its real token
count), then ``Room.submit`` runs it on the engine under the session's salt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvviz.experiments.room.records import Admission
from kvviz.experiments.room.room import Room
from kvviz.model.settings import InputError
from kvviz.model.tokens import tokenize


@dataclass(frozen=True)
class RoomPrefill:
    """A prompt sent through the room: its admission (refused, or run on the engine) and the tokenizer's
    notice when the text was cut. Timing and reuse are the admission's (the engine's own numbers)."""

    admission: Admission
    notice: str | None = None

    @property
    def ok(self) -> bool:
        return self.admission.ok

    @property
    def reused_tokens(self) -> int:
        return self.admission.hit_tokens if self.ok else 0

    @property
    def computed_tokens(self) -> int:
        return self.admission.computed_tokens if self.ok else 0

    @property
    def compute_ms(self) -> float:
        return self.admission.compute_ms or 0.0

    @property
    def wait_ms(self) -> float:
        return self.admission.wait_ms or 0.0

    @property
    def latency_ms(self) -> float:
        return self.admission.latency_ms or 0.0


def room_prefill(room: Room, session_id: str, text: str | None = None,
                 token_ids: Sequence[int] | None = None) -> RoomPrefill:
    """Send one prompt (text or token ids) from ``session_id`` through ``room`` to the engine.

    The room keeps the first ``max_prompt_tokens`` tokens. Raises InputError for empty text or when not
    exactly one of ``text`` and ``token_ids`` is given; a prompt the room refuses comes back with ``ok``
    False (nothing reached the engine)."""
    if (text is None) == (token_ids is None):
        raise InputError("give exactly one of text or token_ids")
    if text is None:
        return RoomPrefill(room.submit(session_id, list(token_ids)))  # type: ignore[arg-type]
    source = room.loop.engine.lm.source
    tok = tokenize(text, model_name=source.key if source is not None else None,
                   max_tokens=room.limits.max_prompt_tokens)
    adm = room.submit(session_id, tok.ids, num_tokens_before_truncation=tok.num_tokens_before_truncation)
    return RoomPrefill(adm, tok.notice if tok.truncated else None)
