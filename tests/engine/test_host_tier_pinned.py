"""With the device pool on CUDA the host tier is page-locked and a load gathers into page-locked staging
buffers: the blocks read equal the unpinned tier's, staging views are contiguous, and a larger load grows the
buffers. Needs CUDA (pin_memory does); run by ``make gpu-check`` machines, skipped elsewhere."""

from __future__ import annotations

import pytest
import torch

from kvviz.engine.offload import HostTier

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="page-locked memory needs CUDA")


def test_pinned_reads_equal_unpinned_and_grow_their_staging():
    args = (40 * 16 * 2 * 2 * 2 * 64 * 4, 16, 2, 2, 64, torch.float32)
    plain, pinned = HostTier.sized(*args), HostTier.sized(*args, pin_memory=True)
    assert pinned.k.is_pinned() and not plain.k.is_pinned()
    pinned.k.normal_()
    pinned.v.normal_()
    plain.k.copy_(pinned.k)
    plain.v.copy_(pinned.v)
    for slots in ([3], [5, 1, 7], list(range(20))):  # the last one is larger than the first staging
        k, v = pinned.read(slots)
        ref_k, ref_v = plain.read(slots)
        assert k.is_pinned() and k.is_contiguous() and torch.equal(k, ref_k) and torch.equal(v, ref_v)
