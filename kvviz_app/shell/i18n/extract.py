"""Extract the UI strings of the text modules (``TEXT_MODULES``) into the catalogs, and check the catalogs against them.

``python -m kvviz_app.shell.i18n.extract``          rewrite locale/kvviz.pot and merge it into every .po (new
                                          entries get an empty msgstr, unused ones are dropped)
``python -m kvviz_app.shell.i18n.extract --check``  exit 1 and list what is untranslated or unused (changes nothing)
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kvviz.util.plural import Plural
from kvviz_app.shell.i18n.catalog import DOMAIN, LOCALE_DIR, load_catalog, po_path
from kvviz_app.shell.i18n.lang import LANGS
from kvviz_app.shell.i18n.texts import TEXT_MODULES

_NOT_TEXT = re.compile(r"^(:material/[a-z_]+:|pages/[\w/]+\.py|[\W\d_]*)$")
TARGET_LANGS = tuple(lang for lang in LANGS if lang != "en")
PLURAL_FORMS = {"ru": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
                      "(n%100<10 || n%100>=20) ? 1 : 2);"}


@dataclass
class Message:
    """One catalog entry: the English text (a str, or (singular, plural)) and where it is defined."""

    msgid: str | tuple[str, str]
    locations: list[str] = field(default_factory=list)


def is_text(s: str) -> bool:
    """Whether a string is UI text (not an icon name, a page path or bare punctuation/digits)."""
    return not _NOT_TEXT.match(s)


def text_modules() -> list[types.ModuleType]:
    return [importlib.import_module(name) for name in TEXT_MODULES.values()]


def _walk(value: Any) -> Iterator[str | tuple[str, str]]:
    if isinstance(value, str):
        if is_text(value):
            yield value
    elif isinstance(value, Plural):
        yield (value.singular, value.plural)
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _walk(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)


#: UI text that lives in data files: (glob under the repository root, JSON path of the strings). Pages
#: show these through ``kvviz_app.shell.i18n.tr``.
DATA_TEXT: list[tuple[str, tuple[str, ...]]] = [
    ("assets/scenarios/*.json", ("title", "description", "steps[].note")),
    ("assets/sessions/*.json", ("title", "description")),
    ("assets/edit_presets.json", ("presets[].title", "presets[].description")),
]


def _json_strings(data: Any, path: str) -> Iterator[str]:
    head, _, rest = path.partition(".")
    if head.endswith("[]"):
        for item in data.get(head[:-2], []) if isinstance(data, dict) else []:
            yield from _json_strings(item, rest)
    elif isinstance(data, dict) and head in data:
        if rest:
            yield from _json_strings(data[head], rest)
        elif isinstance(data[head], str) and is_text(data[head]):
            yield data[head]


def data_text() -> Iterator[tuple[str, str]]:
    """(string, location) of the UI text in DATA_TEXT files, of the provider policies' labels and values,
    of the calculator presets and of the room presets' labels (their prompts are data: never translated)."""
    import json

    root = LOCALE_DIR.parent
    for pattern, paths in DATA_TEXT:
        for file in sorted(root.glob(pattern)):
            data = json.loads(file.read_text(encoding="utf-8"))
            for path in paths:
                for text in _json_strings(data, path):
                    yield text, f"{file.relative_to(root)}:{path}"
    from kvviz.analysis.providers import POLICIES
    from kvviz.analysis.sizes.presets import PRESETS

    for key, policy in POLICIES.items():
        yield policy.label, f"kvviz/analysis/providers.py:POLICIES[{key!r}].label"
        for value in policy.values:  # the page's "policy values used" list, shown through tr()
            yield value.name, f"kvviz/analysis/providers.py:POLICIES[{key!r}].values.name"
            yield value.value, f"kvviz/analysis/providers.py:POLICIES[{key!r}].values.value"
    for preset in PRESETS:  # the calculator shows label and source through tr()
        yield preset.label, f"kvviz/analysis/sizes/presets.py:{preset.key}.label"
        yield preset.source, f"kvviz/analysis/sizes/presets.py:{preset.key}.source"
        if preset.article_note:
            yield preset.article_note, f"kvviz/analysis/sizes/presets.py:{preset.key}.article_note"
    from kvviz.experiments.room.presets import PRESETS as ROOM_PRESETS

    for label in ROOM_PRESETS:  # the room page shows each preset's label through tr()
        yield label, "kvviz/experiments/room/presets.py:PRESETS (key)"


def extract() -> dict[Any, Message]:
    """Every translatable English string of the text modules (and of DATA_TEXT), in definition order."""

    out: dict[Any, Message] = {}
    for module in text_modules():
        short = module.__name__.replace(".", "/")
        for name, value in vars(module).items():
            if name.startswith("_") or isinstance(value, (types.ModuleType, type, types.FunctionType)):
                continue
            for msgid in _walk(value):
                out.setdefault(msgid, Message(msgid)).locations.append(f"{short}.py:{name}")
    for msgid, location in data_text():
        out.setdefault(msgid, Message(msgid)).locations.append(location)
    return out


def missing(lang: str) -> list[Any]:
    """Source strings with no translation in ``lang``'s catalog."""
    catalog = load_catalog(lang)
    return [msgid for msgid in extract() if msgid not in catalog]


def unused(lang: str) -> list[Any]:
    """Catalog entries whose msgid is no longer a source string."""
    source = extract()
    return [msgid for msgid in load_catalog(lang) if msgid not in source]


def _template(messages: dict[Any, Message]):
    from babel.messages.catalog import Catalog

    cat = Catalog(domain=DOMAIN, project="kvviz", charset="utf-8", fuzzy=False)
    for msg in messages.values():
        cat.add(msg.msgid, locations=[(loc, None) for loc in msg.locations[:3]])
    return cat


def update() -> None:
    """Rewrite the .pot and merge it into each language's .po, keeping existing translations."""
    from babel.messages.pofile import read_po, write_po

    messages = extract()
    LOCALE_DIR.mkdir(parents=True, exist_ok=True)
    with (LOCALE_DIR / f"{DOMAIN}.pot").open("wb") as fh:
        write_po(fh, _template(messages), width=110, omit_header=False, sort_output=False)
    for lang in TARGET_LANGS:
        path = po_path(lang)
        old = {}
        if path.exists():
            with path.open("rb") as fh:
                old = {(tuple(m.id) if isinstance(m.id, list) else m.id): m.string
                       for m in read_po(fh, locale=lang) if m.id}
        cat = _template(messages)
        cat.locale = lang
        cat.plural_forms  # noqa: B018 - computed from the locale
        for msgid in messages:
            entry = cat[msgid]
            if msgid in old:
                entry.string = old[msgid]
            elif isinstance(msgid, tuple):
                entry.string = ("",) * 3
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as fh:
            write_po(fh, cat, width=110, sort_output=False, include_previous=False)
        load_catalog.cache_clear()
        print(f"{path}: {len(messages)} entries, {len(missing(lang))} untranslated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvviz_app.shell.i18n.extract", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list untranslated and unused entries; change nothing")
    args = parser.parse_args(argv)
    if not args.check:
        update()
        return 0
    bad = 0
    for lang in TARGET_LANGS:
        for msgid in missing(lang):
            print(f"{lang}: untranslated: {msgid!r}")
            bad += 1
        for msgid in unused(lang):
            print(f"{lang}: unused: {msgid!r}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
