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


def test_the_peer_lane_reads_the_bound_beside_each_one_stream_run_and_takes_the_median():
    from bench.peer import BoundReader
    from bench.peer_servers import Threads

    # 8 MiB in bf16: a read long enough not to round to 0.00 ms
    reader = BoundReader(Threads(cores=1, dtype="bfloat16"), tensors=[torch.ones(4 << 20), torch.ones(24)])
    threads = torch.get_num_threads()
    for label in ("one stream", "16 streams", "one stream", "TTFT", "one stream"):
        reader(label)
    assert torch.get_num_threads() == threads  # the reads' thread count is put back
    assert len(reader.reads) == 3 and all(r.nbytes == ((4 << 20) + 24) * 2 and r.threads == 1 for r in reader.reads)
    bound = reader.bound({"vllm": 10.0, "kvviz": 5.0})
    ms = sorted(r.ms for r in reader.reads)[1]
    assert bound["weights_read_ms"] == round(ms, 2) and bound["weights_read_ms_runs"] == [r.ms for r in reader.reads]
    assert bound["ms_per_token_over_read"] == {"vllm": round(10.0 / bound["weights_read_ms"], 2),
                                               "kvviz": round(5.0 / bound["weights_read_ms"], 2)}
