"""The import contracts of .importlinter hold, and the tool sees an import two hops away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run([LINT, "--no-cache", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_contracts_are_kept():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]
    assert "0 broken" in out.stdout


def test_an_indirect_import_breaks_a_contract(tmp_path):
    pkg = tmp_path / "probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mirror.py").write_text("from probe_pkg import middle\n")
    (pkg / "middle.py").write_text("def later():\n    from probe_pkg import app  # a lazy import counts\n")
    (pkg / "app.py").write_text("")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = probe_pkg\n\n[importlinter:contract:one]\nname = mirror alone\n"
        "type = forbidden\nsource_modules =\n    probe_pkg.mirror\nforbidden_modules =\n    probe_pkg.app\n")
    out = _lint(tmp_path)
    assert out.returncode == 1 and "BROKEN" in out.stdout
    assert "probe_pkg.middle -> probe_pkg.app" in out.stdout


def test_a_type_checking_import_counts(tmp_path):
    """An import under ``if TYPE_CHECKING:`` breaks a contract too (exclude_type_checking_imports is off), so a
    pure layer that needs a heavier type for a hint defines a Protocol instead of importing it."""
    pkg = tmp_path / "probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mirror.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from probe_pkg import app\n")
    (pkg / "app.py").write_text("")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = probe_pkg\n\n[importlinter:contract:one]\nname = mirror alone\n"
        "type = forbidden\nsource_modules =\n    probe_pkg.mirror\nforbidden_modules =\n    probe_pkg.app\n")
    out = _lint(tmp_path)
    assert out.returncode == 1 and "probe_pkg.mirror -> probe_pkg.app" in out.stdout
