"""In-flight block claims: a prompt waits for another prompt that computes its shared prefix, never for
a waiter, never for a short overlap, never past the time limit, and every claim is released."""

from __future__ import annotations

import threading
import time

from kvviz.security.inflight import InflightBlocks, inflight_for

H = [bytes([i]) * 32 for i in range(6)]  # six chained block hashes of one prompt
BS = 16


class FakeStore:
    """Leading stored blocks, as KVStore.peek counts them."""

    def __init__(self) -> None:
        self.blocks: set[bytes] = set()

    def peek(self, hashes) -> int:
        n = 0
        for h in hashes:
            if h not in self.blocks:
                break
            n += 1
        return n


def test_first_prompt_claims_every_block_it_will_store():
    reg, store = InflightBlocks(), FakeStore()
    claim = reg.claim("m", H[:4], 0, BS, store.peek)
    assert claim.keys == [("m", h) for h in H[:4]] and claim.waited_ms < 50
    assert reg.pending() == 4
    reg.release(claim)
    assert reg.pending() == 0 and claim.done.is_set()


def test_second_prompt_waits_until_the_first_stored_the_shared_blocks():
    reg, store = InflightBlocks(), FakeStore()
    first = reg.claim("m", H[:4], 0, BS, store.peek)
    got: dict = {}

    def second() -> None:
        got["claim"] = reg.claim("m", H[:5], 3, BS, store.peek)  # the room counts 3 blocks as hits
        got["have"] = store.peek(H[:3])

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.2)
    assert t.is_alive(), "the second prompt must wait: 48 shared tokens are being computed"
    store.blocks.update(H[:4])  # the first prompt stored its blocks ...
    reg.release(first)  # ... and released its claim
    t.join(5)
    assert not t.is_alive()
    assert got["have"] == 3  # all three reusable blocks are in the store now
    assert got["claim"].keys == [("m", H[4])]  # it computes and claims only its own new block
    assert got["claim"].waited_ms >= 150


def test_no_wait_below_the_shared_token_threshold_or_for_another_model():
    reg, store = InflightBlocks(), FakeStore()
    first = reg.claim("m", H[:1], 0, BS, store.peek)  # one block = 16 tokens < 32
    t0 = time.perf_counter()
    other = reg.claim("m", H[:3], 2, BS, store.peek)
    assert time.perf_counter() - t0 < 0.1 and other.keys == [("m", h) for h in H[1:3]]
    elsewhere = reg.claim("other-model", H[:3], 2, BS, store.peek)
    assert elsewhere.waited_ms < 100 and len(elsewhere.keys) == 3
    for c in (first, other, elsewhere):
        reg.release(c)
    assert reg.pending() == 0


def test_a_wait_ends_at_the_time_limit_and_a_stale_release_keeps_the_new_claim():
    reg, store = InflightBlocks(max_wait_s=0.3), FakeStore()
    stuck = reg.claim("m", H[:3], 0, BS, store.peek)
    t0 = time.perf_counter()
    late = reg.claim("m", H[:3], 2, BS, store.peek)
    assert 0.25 <= time.perf_counter() - t0 < 2
    assert late.keys == []  # every block is still claimed by the stuck prompt: nothing new to claim
    reg.release(late)
    assert reg.pending() == 3  # releasing a claim never drops another prompt's blocks
    reg.release(stuck)
    assert reg.pending() == 0


def test_a_prompt_that_will_not_store_claims_nothing():
    reg, store = InflightBlocks(), FakeStore()
    claim = reg.claim("m", H[:4], 0, BS, store.peek, will_store=False)
    assert claim.keys == [] and reg.pending() == 0


def test_one_registry_per_store():
    a, b = FakeStore(), FakeStore()
    assert inflight_for(a) is inflight_for(a) and inflight_for(a) is not inflight_for(b)


def test_a_waiter_borrows_from_the_owner_once_its_request_is_queued():
    reg, store = InflightBlocks(), FakeStore()
    store.blocks.add(H[0])  # block 0 is stored already; the owner computes blocks 1-3
    owner = reg.claim("m", H[:4], 1, BS, store.peek)
    got: dict = {}

    def waiter() -> None:
        got["claim"] = reg.claim("m", H[:5], 3, BS, store.peek, borrow=True)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    assert t.is_alive(), "nothing to borrow before the owner's request is queued"
    cache = object()
    reg.lend(owner, cache)  # the owner's forward request is in the scheduler's queue
    t.join(5)
    assert not t.is_alive() and owner.lender is cache
    claim = got["claim"]
    assert claim.loan is not None and claim.loan.cache is cache
    assert claim.loan.tokens == 3 * BS  # the stored block and the two the owner computes, of its 3 reusable
    assert claim.keys == [("m", H[4])] and claim.waited_ms < 2000
    reg.release(claim)
    reg.release(owner)
    assert reg.pending() == 0


def test_without_borrow_a_lent_request_is_still_waited_for():
    reg, store = InflightBlocks(max_wait_s=0.3), FakeStore()
    owner = reg.claim("m", H[:3], 0, BS, store.peek)
    reg.lend(owner, object())
    t0 = time.perf_counter()
    plain = reg.claim("m", H[:3], 2, BS, store.peek)
    assert plain.loan is None and time.perf_counter() - t0 >= 0.25  # waited to the limit
    borrowed = reg.claim("m", H[:3], 2, BS, store.peek, borrow=True)
    assert borrowed.loan is not None and borrowed.loan.tokens == 2 * BS
    for c in (plain, borrowed, owner):
        reg.release(c)
