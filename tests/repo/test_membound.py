"""bench.membound: the weights' bytes are counted once and read in one pass (a flat copy), in their dtype."""

from __future__ import annotations

import torch

from bench.membound import weight_read


def test_the_read_counts_every_byte_once_in_the_weights_dtype():
    shapes = [(300, 200), (7,), (64, 64)]
    elements = 300 * 200 + 7 + 64 * 64
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        read = weight_read(runs=3, tensors=[torch.ones(s, dtype=dtype) for s in shapes])
        assert read.nbytes == elements * size
        assert len(read.runs) == 3 and read.ms == sorted(read.runs)[1] and read.ms > 0
        assert read.gb_s == read.nbytes / (read.ms / 1000.0) / 1e9
