"""kvviz: why prompt caching works, and why one changed character breaks it.

Subpackages: ``core`` (pure Python engine maths: hashing, block pool, radix tree, KV sizes),
``model`` (the real model: loading, prefill with KV capture; the only place torch is imported),
``figures`` (Plotly figure builders), ``cli`` (``python -m kvviz``), ``text`` (every UI string).
This package never imports streamlit.
"""

__version__ = "0.1.0"
