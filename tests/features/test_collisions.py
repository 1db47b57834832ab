"""Collision demos without the model: the toy hash, a forced collision serving A's block to B, NONE_HASH
under fixed and random seeds, Python's hash in fresh processes, measured costs, the birthday bound, CLI."""

from __future__ import annotations

import json

import pytest

from kvviz.cli import main
from kvviz.experiments.security.collisions import (
    birthday_blocks,
    birthday_probability,
    force_collision,
    measure_hash_costs,
    none_hash_demo,
    python_hash_facts,
    truncated_hash,
)

A = [5965, 1462, 314, 8590, 2783, 603, 284, 957, 5461, 45609, 314, 216, 36, 36, 39, 33, 30, 11, 12]
B = [5965, 1462, 314, 47482, 25056, 749, 284, 957, 5461, 45609, 314, 216, 41, 41, 32, 34, 30, 198, 17872, 42]


def test_truncated_hash_keeps_only_the_given_bits():
    h12 = truncated_hash(12)
    d = h12((b"x", (1, 2), None))
    assert len(d) == 2 and d[1] & 0x0F == 0
    assert len(truncated_hash(16)((1,))) == 2 and len(truncated_hash(24)((1,))) == 3
    for bad in (3, 25, True, 8.0):
        with pytest.raises(ValueError):
            truncated_hash(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bits", [8, 12])
def test_forced_collision_serves_a_block_of_a_to_b(bits):
    d = force_collision(A, B, bits=bits, vocab_size=49152)
    assert d.found and 1 <= d.tries <= 16 * 2**bits
    assert d.tokens_b[:14] == tuple(B[:14]) and d.tokens_b[16:] == tuple(B[16:])  # only the forged slots
    assert d.tokens_b[:16] != tuple(A[:16]) and set(d.changed_positions) <= {14, 15}
    assert d.toy_hashes_a[0] == d.toy_hashes_b[0]  # the truncated hashes collide ...
    assert d.sha_hashes_a[0] != d.sha_hashes_b[0]  # ... the full SHA-256 digests do not
    assert d.served_block_ids == (d.a_block_ids[0],)  # B is served A's physical block 0
    assert d.sha_hit_blocks == 0  # a SHA-256 pool serves B nothing
    out = d.as_dict()
    assert out["hit_blocks_toy"] == 1 and out["expected_tries"] == 2**bits
    json.dumps(out)


def test_no_collision_within_the_budget_serves_nothing():
    d = force_collision(A, B, bits=24, max_tries=50)
    assert not d.found and d.tries == 50 and d.tokens_b == tuple(B) and d.served_block_ids == ()


def test_force_collision_rejects_bad_input():
    with pytest.raises(ValueError):
        force_collision(A[:10], B)
    with pytest.raises(ValueError):
        force_collision(A, B, positions=5)
    with pytest.raises(ValueError):
        force_collision(A, ["x"] * 20)  # type: ignore[list-item]


def test_none_hash_seeded_is_reproducible_random_is_not():
    demo = none_hash_demo(list(range(48)))
    assert demo.seeded_equal and demo.random_all_differ
    assert demo.roots["seed0_a"] == demo.roots["seed0_b"] != demo.roots["random_a"]
    assert len(demo.chains["seed0_a"]) == 3
    with pytest.raises(ValueError):
        none_hash_demo([1, 2, 3])


def test_python_hash_in_fresh_processes():
    facts = python_hash_facts()
    assert facts.row("hash((1, 2, 3))").same  # int tuples ignore PYTHONHASHSEED
    assert not facts.row("hash('abc')").same  # strings are randomised per seed
    assert facts.row("hash(-1) == hash(-2)").run1 == "True"
    assert facts.python_version.count(".") == 2


def test_hash_costs_are_measured_for_every_function():
    costs = measure_hash_costs(num_blocks=200, repeats=2)
    names = [c.name for c in costs]
    assert names == ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor", "python_hash", "cbor_only"]
    assert all(c.ns_per_block > 0 for c in costs)
    by = {c.name: c for c in costs}
    assert by["sha256_cbor"].digest_bytes == 32 and by["python_hash"].unsafe and not by["sha256_cbor"].unsafe
    assert by["sha256_cbor"].ns_per_token == pytest.approx(by["sha256_cbor"].ns_per_block / 16)
    with pytest.raises(ValueError):
        measure_hash_costs(num_blocks=0)


def test_birthday_bound():
    assert birthday_probability(0, 64) == 0.0
    assert birthday_probability(birthday_blocks(64), 64) == pytest.approx(0.5)
    assert 4e9 < birthday_blocks(64) < 6e9 and birthday_blocks(256) > 1e38
    assert birthday_probability(1e6, 16) == pytest.approx(1.0)


def test_collisions_cli_json(capsys):
    assert main(["collisions", "--bits", "10", "--blocks", "50", "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["collision"]["found"] and out["collision"]["hit_blocks_toy"] == 1
    assert out["collision"]["hit_blocks_sha256"] == 0 and out["none_hash"]["seed0_equal"]
    assert {c["name"] for c in out["hash_costs"]} >= {"sha256_cbor", "xxhash_cbor", "python_hash"}
    assert out["python_hash"]["hash((1, 2, 3))"]["same"] is True


@pytest.mark.parametrize("argv", [["--bits", "99"], ["--blocks", "0"], ["--a", "   "], ["--model", ""], ["--model", "  "]])
def test_collisions_cli_errors_are_one_line(argv, capsys):
    assert main(["collisions", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
