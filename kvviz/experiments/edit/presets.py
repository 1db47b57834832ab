"""The edit page's preset prompt pairs, read from assets/edit_presets.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvviz.mirror import limits

# ----------------------------------------------------------------------------- presets


#: The preset the Edit page opens on, also drawn on the landing page (an edit near the end of a long prompt).
DEFAULT_PRESET_ID = "cat_tail"
PRESETS_PATH = Path(__file__).resolve().parents[3] / "assets" / "edit_presets.json"


@dataclass(frozen=True)
class EditPreset:
    """A prompt pair for the page: the original ``a``, its edit ``b``, and the block size to show."""

    id: str
    title: str
    description: str
    a: str
    b: str
    block_size: int


def _preset_text(spec: object, texts: dict[str, str], a: str | None) -> str:
    if isinstance(spec, str):
        if spec.startswith("$"):
            if spec[1:] not in texts:
                raise ValueError(f"unknown text {spec!r}")
            return texts[spec[1:]]
        return spec
    if isinstance(spec, dict) and a is not None and isinstance(spec.get("replace"), list) and len(spec["replace"]) == 2:
        old, new = spec["replace"]
        if old not in a:
            raise ValueError(f"{old!r} does not occur in prompt a")
        return a.replace(old, new, 1)
    raise ValueError(f"bad prompt spec {spec!r}")


def load_edit_presets(path: Path | str | None = None) -> list[EditPreset]:
    """The presets of ``assets/edit_presets.json`` (see its ``about``), texts resolved."""
    data = json.loads(Path(path or PRESETS_PATH).read_text(encoding="utf-8"))
    texts = data.get("texts", {})
    out = []
    for item in data["presets"]:
        a = _preset_text(item["a"], texts, None)
        b = _preset_text(item["b"], texts, a)
        out.append(EditPreset(item["id"], item["title"], item.get("description", ""), a, b,
                              limits.block_size(int(item.get("block_size", limits.DEFAULT_BLOCK_SIZE)))))
    return out


# ----------------------------------------------------------------------------- the edit (fast) step
