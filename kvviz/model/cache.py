"""Atomic, self-checking cache folders for de-quantised model copies.

A *unit* is a folder whose last-written file is ``manifest.json`` listing every other file with its
size and xxh3-128 digest. A unit is valid only if the manifest parses and every file matches, so a
partial write, a truncated file, a missing file or garbage content is detected and the unit rebuilt.
Units are built in a temporary sibling folder and renamed into place, under a cross-process lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import xxhash

MANIFEST = "manifest.json"
FORMAT = 1
_CHUNK = 16 << 20

try:  # POSIX advisory locks; on other systems only the in-process lock applies
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_THREAD_LOCK = threading.Lock()


def file_digest(path: Path) -> str:
    """xxh3-128 hex digest of a file's bytes (fast: integrity, not security)."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path, extra: dict | None = None) -> dict:
    """List every file in ``folder`` (size and digest) in ``manifest.json``, written last."""
    files = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST):
        files[path.name] = {"size": path.stat().st_size, "xxh3_128": file_digest(path)}
    manifest = {"format": FORMAT, "files": files, "created": time.time(), **(extra or {})}
    tmp = folder / (MANIFEST + ".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / MANIFEST)
    return manifest


def check_unit(folder: Path, required: tuple[str, ...] = ()) -> str | None:
    """None when ``folder`` is a complete, intact unit; otherwise the reason it is not."""
    if not folder.is_dir():
        return "missing"
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        if manifest.get("format") != FORMAT or not isinstance(files, dict):
            return "unknown manifest format"
    except FileNotFoundError:
        return "no manifest (partial write)"
    except (OSError, ValueError, KeyError, TypeError):
        return "unreadable manifest"
    for name in required:
        if name not in files:
            return f"{name} not listed in the manifest"
    for name, meta in files.items():
        path = folder / name
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != meta.get("size"):
            return f"{name} has {size:,} bytes, expected {meta.get('size'):,}"
        if file_digest(path) != meta.get("xxh3_128"):
            return f"{name} content does not match its digest"
    return None


@contextlib.contextmanager
def build_lock(parent: Path) -> Iterator[None]:
    """Serialise unit builds across threads and processes sharing ``parent``."""
    parent.mkdir(parents=True, exist_ok=True)
    with _THREAD_LOCK:
        if fcntl is None:  # pragma: no cover
            yield
            return
        with open(parent / ".build.lock", "a+") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_unit(
    folder: Path,
    build: Callable[[Path], dict | None],
    required: tuple[str, ...] = (),
    on_rebuild: Callable[[str], None] | None = None,
) -> bool:
    """Make ``folder`` a valid unit, calling ``build(tmp_folder)`` if it is not; True if it was built.

    ``build`` writes the files into an empty temporary folder and may return extra manifest fields.
    The old (damaged) folder is moved aside and removed only after the new one is complete.
    """
    if check_unit(folder, required) is None:
        return False
    with build_lock(folder.parent):
        reason = check_unit(folder, required)
        if reason is None:  # another process finished it while we waited
            return False
        if on_rebuild is not None:
            on_rebuild(reason)
        tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            extra = build(tmp) or {}
            write_manifest(tmp, extra)
            if folder.exists() or folder.is_symlink():
                trash = folder.parent / f".trash-{folder.name}-{uuid.uuid4().hex[:8]}"
                os.replace(folder, trash)
                shutil.rmtree(trash, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return True
