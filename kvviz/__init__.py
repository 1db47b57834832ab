"""kvviz: why prompt caching works, and why one changed character breaks it.

The library: numbers, records and error codes. ``mirror`` (vLLM/SGLang's prefix cache in pure Python),
``sim`` (simulations: comparison, traces, KV sizes, paging, providers), ``util`` (small helpers),
``engine`` and ``model`` (torch: the paged engine, the real model), the features (``edit``, ``room``,
``security``, ``sessions``, ``live``, ``workload``, ``batching``), ``server`` and ``cli``
(``python -m kvviz``, with its English words for the codes). No UI: the app is ``kvviz_app``
(.importlinter holds the layers).
"""

__version__ = "0.1.0"
