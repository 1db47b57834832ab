"""The room on the real engine (``room_prefill`` -> ``Room.submit`` -> the process-wide engine loop): reuse
is the engine's own count and exact, refusals never reach the engine, the presenter's reset empties the
engine's prefix cache, concurrent sessions share steps and a cold room's shared prefix is computed once."""

from __future__ import annotations

import json
import threading

import pytest

from kvviz.cli import main
from kvviz.engine import get_engine_loop
from kvviz.experiments.room.limits import RoomLimits
from kvviz.experiments.room.prefill import room_prefill
from kvviz.experiments.room.room import Room
from kvviz.model import InputError, tokenize

pytestmark = pytest.mark.model

TEXT = "Shared system prompt: answer briefly and cite the block size. " * 3 + "Question: why?"


def _sessions_at_once(room: Room, n: int, send) -> list[BaseException]:
    """Run ``send(i, session_id)`` for ``n`` joined sessions in threads released together; their errors."""
    gate = threading.Barrier(n)
    errors: list[BaseException] = []
    sids = [room.join() for _ in range(n)]

    def session(i: int) -> None:
        gate.wait()
        try:
            send(i, sids[i])
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.fixture(scope="module")
def loop():
    return get_engine_loop()


def fresh_room(loop, **limits) -> Room:
    room = Room(RoomLimits(**limits), engine=loop)
    assert room.reset(force=True).ok  # an empty prefix cache (other tests of this process used the engine)
    return room


def test_room_prefill_reuses_another_sessions_kv_exactly(loop):
    room = fresh_room(loop)
    a, b = room.join(), room.join()
    first = room_prefill(room, a, text=TEXT)
    assert first.ok and first.reused_tokens == 0 and first.computed_tokens == first.admission.num_tokens
    second = room_prefill(room, b, text=TEXT)
    assert second.ok and second.admission.blocks_from_others >= 2
    n = second.admission.num_tokens
    assert second.reused_tokens == (n - 1) // 16 * 16  # vLLM's count: whole blocks, below the last token
    assert second.computed_tokens == n - second.reused_tokens
    # the engine read the first prompt's K/V from its blocks: the next token is the one a full prefill gives
    assert second.admission.first_token_id == first.admission.first_token_id is not None
    assert room.totals().median_prefill_hit_ms is not None
    room.check_invariants()


def test_refused_and_bad_prompts_never_reach_the_engine(loop):
    room = fresh_room(loop, burst=1, refill_per_s=0.001, max_prompt_tokens=8)
    a = room.join()
    before = loop.stats().prompt_tokens_total
    ok = room_prefill(room, a, text=TEXT)
    assert ok.ok and ok.admission.truncated and ok.admission.num_tokens == 8 and ok.notice
    refused = room_prefill(room, a, text=TEXT)
    assert not refused.ok and refused.admission.compute_ms is None and "wait" in refused.admission.error
    with pytest.raises(InputError):
        room_prefill(room, a, text="   ")
    with pytest.raises(InputError):
        room_prefill(room, a)
    assert loop.stats().prompt_tokens_total == before + 8  # only the admitted prompt reached the engine


def test_reset_empties_the_engines_prefix_cache(loop):
    room = fresh_room(loop)
    a = room.join()
    room_prefill(room, a, text=TEXT)
    assert room.totals().cached_blocks > 0
    assert room.reset(force=True).ok
    assert room.totals().cached_blocks == 0 and room.peek(tokenize(TEXT).ids) == 0


def test_concurrent_sessions_on_the_engine_keep_the_room_consistent(loop):
    room = fresh_room(loop)
    outs = []

    def send(i: int, sid: str) -> None:
        for k in range(2):
            out = room_prefill(room, sid, text=TEXT + f" {i}-{k}")
            assert out.ok, out.admission.error
            outs.append(out)

    errors = _sessions_at_once(room, 8, send)
    assert not errors, errors[:3]
    room.check_invariants()
    t = room.totals()
    assert t.prompts == 16 and t.cross_session_hits > 0
    assert all(0 <= o.reused_tokens < o.admission.num_tokens for o in outs)


def test_room_reports_the_real_token_count_of_a_long_paste(loop):
    """A 50,000-character paste must report every token of the text, not those of its first 20,000."""
    room = fresh_room(loop)
    a = room.join()
    text = "abc " * 12_500  # 50,000 characters
    real = tokenize(text, max_tokens=32768).num_tokens_before_truncation
    out = room_prefill(room, a, text=text)
    assert out.ok and out.admission.truncated
    assert out.admission.num_tokens_before_truncation == real > room.limits.max_prompt_tokens
    assert out.admission.num_tokens == room.limits.max_prompt_tokens
    assert real > tokenize(text[: room.limits.max_prompt_chars], max_tokens=32768).num_tokens_before_truncation


def test_room_prefill_times_compute_apart_from_waiting(loop):
    """The room records the prefill's compute (its share of its engine steps); waiting in the
    engine's queue is kept apart."""
    room = fresh_room(loop)
    a = room.join()
    out = room_prefill(room, a, text=TEXT)
    assert out.ok and out.compute_ms > 0 and out.wait_ms >= 0
    assert out.latency_ms >= out.compute_ms
    entry = room.feed(a)[0]
    assert entry.prefill_ms == out.compute_ms and entry.wait_ms == out.wait_ms


def test_sessions_sending_together_share_a_step_and_compute_the_shared_prefix_once(loop):
    """Eight sessions send the same system prompt at the same moment into a cold room: they run in one
    engine step, one of them computes the shared blocks and the others read them in that same step (the
    scheduler caches a block when it allocates it; each layer writes K/V before attention): no lending,
    no waiting, and each one's next token is the one it gets alone."""
    room = fresh_room(loop)
    outs = []
    errors = _sessions_at_once(room, 8, lambda i, sid: outs.append(room_prefill(room, sid, text=TEXT + f" attendee {i}")))
    assert not errors, errors[:3]
    assert all(o.ok for o in outs)
    shared = min(o.admission.num_tokens for o in outs) // 16 * 16 - 16  # blocks every prompt has in common
    from_scratch = [o for o in outs if o.reused_tokens == 0]
    assert len(from_scratch) == 1, [o.reused_tokens for o in outs]
    assert all(o.reused_tokens >= shared for o in outs if o not in from_scratch)
    assert max(o.admission.step_requests for o in outs) > 1  # they shared a step
    alone = Room(RoomLimits(), engine=loop)
    assert alone.reset(force=True).ok
    for o in outs[:2]:  # the same next token when the prompt runs alone in a cold cache
        solo = alone.submit(alone.join(), list(o.admission.token_ids))
        assert solo.hit_tokens == 0 and solo.first_token_id == o.admission.first_token_id
        assert alone.reset(force=True).ok
    room.check_invariants()


def test_room_cli_salt_view(capsys):
    text = "The same shared system prompt, long enough to fill two whole blocks of sixteen tokens each. " * 2
    argv = ["room", "--prompt", f"a:{text}", "--prompt", f"b:{text}", "--salt", "b:private", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    a, b = out["prompts"]
    full = a["salt_view"]["cached_blocks_without_salt"]
    assert full >= 2 and a["salt_view"] == {"salt": "illustrative", "cached_blocks_without_salt": full,
                                            "cached_blocks_with_salt": 0}
    assert b["hit_tokens"] == 0 and b["salt_view"] == {"salt": "own", "cached_blocks_without_salt": full,
                                                        "cached_blocks_with_salt": full}
    assert a["prefill_compute_ms"] > 0 and out["invariants_ok"]
