"""The compiled module is built from every source, with the shared header's digest among its flags: torch's loader
rebuilds when a source or a flag changes, so an edit to the header alone must change a flag."""

from __future__ import annotations

import hashlib

import torch.utils.cpp_extension as ext

from kvviz.engine import kernels


def test_the_build_names_every_source_and_the_headers_digest(monkeypatch):
    seen: dict = {}
    monkeypatch.setattr(ext, "is_ninja_available", lambda: True)
    monkeypatch.setattr(ext, "load", lambda **kw: seen.update(kw) or object())
    kernels._build()
    assert [p.rsplit("/", 1)[-1] for p in seen["sources"]] == ["paged_attention.cpp", "layer_ops.cpp", "gemv.cpp"]
    digest = hashlib.sha256(b"".join(h.read_bytes() for h in kernels.HEADERS)).hexdigest()[:16]
    assert f"-DKVVIZ_HEADERS={digest}" in seen["extra_cflags"]
    assert {h.name for h in kernels.HEADERS} == {"vec.h", "tiles.h"}
    for source in (*kernels.SOURCES, *kernels.HEADERS):  # every header a source or header includes is hashed
        for line in source.read_text().splitlines():
            if line.startswith('#include "'):
                assert kernels.HERE / line.split('"')[1] in kernels.HEADERS

