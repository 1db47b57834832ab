"""The process-wide room every browser session joins, and its presenter key (``KVVIZ_PRESENTER_KEY``)."""

from __future__ import annotations

import secrets
import threading

from kvviz.experiments.room.limits import RoomLimits
from kvviz.experiments.room.room import Room
from kvviz.settings import settings

ENV_PRESENTER_KEY = "KVVIZ_PRESENTER_KEY"
_ROOM: Room | None = None
_ROOM_LOCK = threading.Lock()
_KEY_GENERATED = False


def get_room() -> Room:
    """The process-wide room every browser session joins, created on first use, on the process-wide
    engine (``kvviz.engine.get_engine_loop``, started on the room's first prompt). Its presenter key is ``KVVIZ_PRESENTER_KEY``, or a random one generated
    here when that is unset or blank: the room's reset always needs a key."""
    global _ROOM, _KEY_GENERATED
    with _ROOM_LOCK:
        if _ROOM is None:
            key = settings().presenter_key or ""
            _KEY_GENERATED = not key
            _ROOM = Room(RoomLimits(), presenter_key=key or secrets.token_urlsafe(12))
        return _ROOM


def presenter_key_generated() -> bool:
    """True when the process-wide room's presenter key was generated (no ``KVVIZ_PRESENTER_KEY``)."""
    return _KEY_GENERATED
