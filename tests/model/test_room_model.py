"""The room's model path (``room_prefill``): K/V reused exactly as far as the room's hit, the store keyed
like the pool, refusals before the model, reset clearing the room's K/V, and concurrent sessions."""

from __future__ import annotations

import threading

import pytest
import torch

from kvviz.model import InputError, load_model, prefill
from kvviz.room.limits import RoomLimits
from kvviz.room.prefill import room_kv_store, room_prefill, store_hashes_match_room
from kvviz.room.room import Room

pytestmark = pytest.mark.model

TEXT = "Shared system prompt: answer briefly and cite the block size. " * 3 + "Question: why?"


def _sessions_at_once(room: Room, n: int, send) -> list[BaseException]:
    """Run ``send(i, session_id)`` for ``n`` joined sessions in threads released together; their errors."""
    gate = threading.Barrier(n)
    errors: list[BaseException] = []

    def session(i: int) -> None:
        sid = room.join()
        gate.wait()
        try:
            send(i, sid)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.fixture(scope="module")
def lm():
    return load_model()


def test_room_prefill_reuses_another_sessions_kv_exactly(lm):
    room = Room(RoomLimits())
    a, b = room.join(), room.join()
    first = room_prefill(lm, room, a, text=TEXT)
    assert first.ok and first.reused_tokens == 0 and first.stored_blocks == first.admission.num_tokens // 16
    second = room_prefill(lm, room, b, text=TEXT)
    assert second.ok and second.admission.blocks_from_others >= 2
    assert second.reused_tokens == second.admission.hit_tokens > 0
    assert second.computed_tokens == second.admission.num_tokens - second.reused_tokens
    full = prefill(lm, token_ids=list(second.admission.token_ids))
    assert torch.allclose(second.last_logits, full.last_logits, atol=1e-3)  # reuse is exact
    assert store_hashes_match_room(room, second.admission.token_ids)
    assert store_hashes_match_room(room, second.admission.token_ids, "salt")
    assert room.totals().median_prefill_hit_ms is not None
    room.check_invariants()


def test_refused_and_bad_prompts_never_reach_the_model(lm):
    room = Room(RoomLimits(burst=1, refill_per_s=0.001, max_prompt_tokens=8))
    a = room.join()
    ok = room_prefill(lm, room, a, text=TEXT)
    assert ok.ok and ok.admission.truncated and ok.admission.num_tokens == 8 and ok.notice
    refused = room_prefill(lm, room, a, text=TEXT)
    assert not refused.ok and refused.cached is None and "wait" in refused.admission.error
    with pytest.raises(InputError):
        room_prefill(lm, room, a, text="   ")
    with pytest.raises(InputError):
        room_prefill(lm, room, a)


def test_reset_clears_the_rooms_kv_store(lm):
    room = Room(RoomLimits())
    a = room.join()
    room_prefill(lm, room, a, text=TEXT)
    store = room_kv_store(room)
    assert len(store) > 0
    assert room.reset(force=True).ok
    assert len(store) == 0 and room.totals().cached_blocks == 0


def test_concurrent_sessions_on_the_model_keep_the_room_consistent(lm):
    room = Room(RoomLimits())
    outs = []

    def send(i: int, sid: str) -> None:
        for k in range(2):
            out = room_prefill(lm, room, sid, text=TEXT + f" {i}-{k}")
            assert out.ok, out.admission.error
            outs.append(out)

    errors = _sessions_at_once(room, 8, send)
    assert not errors, errors[:3]
    room.check_invariants()
    t = room.totals()
    assert t.prompts == 16 and t.cross_session_hits > 0
    assert all(o.reused_tokens <= o.admission.hit_tokens for o in outs)


def test_room_reports_the_real_token_count_of_a_long_paste(lm):
    """#11 item 4: 50,000 characters must report every token of the text, not those of its first 20,000."""
    from kvviz.model import tokenize

    room = Room(RoomLimits())
    a = room.join()
    text = "abc " * 12_500  # 50,000 characters
    real = tokenize(text, max_tokens=32768).num_tokens_before_truncation
    out = room_prefill(lm, room, a, text=text)
    assert out.ok and out.admission.truncated
    assert out.admission.num_tokens_before_truncation == real > room.limits.max_prompt_tokens
    assert out.admission.num_tokens == room.limits.max_prompt_tokens
    assert real > tokenize(text[: room.limits.max_prompt_chars], max_tokens=32768).num_tokens_before_truncation


def test_room_prefill_times_compute_apart_from_waiting(lm):
    """#11 item 5: the room records the forward's compute time; waiting for the model is kept apart."""
    room = Room(RoomLimits())
    a = room.join()
    out = room_prefill(lm, room, a, text=TEXT)
    assert out.ok and out.compute_ms > 0 and out.wait_ms >= 0
    assert out.latency_ms >= out.compute_ms
    entry = room.feed(a)[0]
    assert entry.prefill_ms == out.compute_ms and entry.wait_ms == out.wait_ms


def test_sessions_sending_together_compute_a_shared_prefix_once(lm):
    """Eight sessions send the same system prompt at the same moment into a cold room: one computes the
    shared blocks, the others wait for it (kvviz.security.inflight) and reuse them, so together they
    compute the shared prefix once, and each one's logits still equal a full prefill's."""
    room = Room(RoomLimits())
    outs = []
    errors = _sessions_at_once(room, 8, lambda i, sid: outs.append(room_prefill(lm, room, sid, text=TEXT + f" attendee {i}")))
    assert not errors, errors[:3]
    assert all(o.ok for o in outs)
    shared = min(o.admission.num_tokens for o in outs) // 16 * 16 - 16  # blocks every prompt has in common
    from_scratch = [o for o in outs if o.reused_tokens == 0]
    assert len(from_scratch) == 1, [o.reused_tokens for o in outs]
    assert all(o.reused_tokens >= shared for o in outs if o not in from_scratch)
    assert sum(o.computed_tokens for o in outs) < 2 * from_scratch[0].admission.num_tokens + 7 * 16
    waited = [o for o in outs if o.reused_tokens > 0]
    assert all(o.wait_ms > 0 for o in waited)
    o = max(outs, key=lambda o: o.reused_tokens)
    full = prefill(lm, token_ids=list(o.admission.token_ids))
    assert torch.allclose(o.last_logits, full.last_logits, atol=1e-3)
    room.check_invariants()


def test_a_cold_rooms_first_prompts_borrow_the_shared_prefix_in_its_pass(lm):
    """Eight sessions send the same system prompt at once into a cold room: one prompt computes it, and
    the prompts waiting for it queue behind its request and borrow its K/V inside the same forward pass
    (kvviz.security.inflight), instead of waiting for a pass of their own; their logits still equal a
    full prefill's."""
    from kvviz.model.prefill import scheduler_for

    sched = scheduler_for(lm)
    before = max((p.pass_id for p in sched.history()), default=0)
    room = Room(RoomLimits())
    outs = []
    errors = _sessions_at_once(room, 8, lambda i, sid: outs.append(room_prefill(lm, room, sid, text=TEXT + f" guest {i}")))
    assert not errors, errors[:3]
    owner = [o for o in outs if o.reused_tokens == 0]
    assert len(owner) == 1
    passes = [p for p in sched.history() if p.pass_id > before]
    first = next(p for p in passes if any(i.past_tokens == 0 and i.tag == "room" for i in p.items))
    riders = [i for i in first.items if i.tag == "room" and i.past_tokens > 0]
    assert riders, [(p.pass_id, [(i.past_tokens, i.new_tokens) for i in p.items]) for p in passes]
    for o in outs:
        full = prefill(lm, token_ids=list(o.admission.token_ids))
        assert torch.allclose(o.last_logits, full.last_logits, atol=1e-3)
    room.check_invariants()
