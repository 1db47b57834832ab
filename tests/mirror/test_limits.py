"""The block-size range and default have one home (kvviz.mirror.limits); every edge uses it."""

from __future__ import annotations

import pytest

from kvviz.analysis.paging import experiment as paging
from kvviz.analysis.sizes import kv_capacity
from kvviz.mirror import hashing, limits


def test_one_home_for_the_range_and_the_default():
    assert (limits.MIN_BLOCK_SIZE, limits.DEFAULT_BLOCK_SIZE, limits.MAX_BLOCK_SIZE) == (1, 16, 256)
    assert not hasattr(hashing, "DEFAULT_BLOCK_SIZE") and not hasattr(hashing, "MAX_BLOCK_SIZE")
    assert not hasattr(hashing, "validate_block_size")  # one validator: limits.block_size, at the edge
    assert kv_capacity.DEFAULT_BLOCK_SIZE is limits.DEFAULT_BLOCK_SIZE
    assert not hasattr(__import__("kvviz.analysis.sizes.kvsize", fromlist=["x"]), "MAX_BLOCK_SIZE")
    assert limits.BLOCK_SIZE_CHOICES[0] == limits.MIN_BLOCK_SIZE
    assert limits.BLOCK_SIZE_CHOICES[-1] == limits.MAX_BLOCK_SIZE


@pytest.mark.parametrize("value", [1, 16, 256])
def test_block_size_accepts_the_range(value):
    assert limits.block_size(value) == value


@pytest.mark.parametrize(("value", "message"), [
    (0, "block size must be in 1..256, got 0"), (257, "block size must be in 1..256, got 257"),
    (-1, "got -1"), (True, "must be an integer"), (16.0, "must be an integer"), ("16", "must be an integer"),
])
def test_block_size_refuses_the_rest(value, message):
    with pytest.raises(ValueError, match=message):
        limits.block_size(value)


def test_engine_capacity_and_paging_share_the_maximum():
    with pytest.raises(ValueError, match="block size must be in 1..256"):
        limits.block_size(257)
    with pytest.raises(ValueError):
        paging.PagingConfig(memory_tokens=512, block_size=512).validate()


@pytest.mark.parametrize("command", [
    ["hash", "--tokens", "1,2"], ["diff", "--a-tokens", "1", "--b-tokens", "1"], ["bytes", "--preset", "llama-2-7b"],
    ["paging"], ["session", "--example", "chat"], ["reuse", "--a", "x", "--b", "y"],
])
def test_every_block_size_flag_is_checked_once_at_parsing(command, capsys):
    from kvviz.cli import main

    assert main([*command, "--block-size", "257"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--block-size: block size must be in 1..256, got 257" in err
