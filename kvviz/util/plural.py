"""A count-dependent message (ngettext): English has two forms, Russian three (блок / блока / блоков).

The library writes English with it (the CLI's lines); the app's catalogs give the other forms
(``kvviz_app.shell.i18n.translate`` returns a ``LocalePlural`` that also writes numbers the language's way)."""

from __future__ import annotations

from dataclasses import dataclass


def plural_index(lang: str, n: float) -> int:
    """The gettext plural-form index of ``n`` in ``lang`` (the catalog's Plural-Forms rule)."""
    if isinstance(n, float) and not n.is_integer():
        return 1 if lang == "en" else 2
    n = abs(int(n))
    if lang == "ru":
        if n % 10 == 1 and n % 100 != 11:
            return 0
        if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
            return 1
        return 2
    return 0 if n == 1 else 1


@dataclass(frozen=True)
class Plural:
    """English singular and plural templates; ``count`` names the placeholder that picks the form.

    ``Plural("{n} block", "{n} blocks").format(n=3)`` -> "3 blocks"; translated by the app's catalog,
    ``forms`` holds the language's forms (three in Russian).
    """

    singular: str
    plural: str
    count: str = "n"
    lang: str = "en"
    forms: tuple[str, ...] = ()

    def form(self, n: float) -> str:
        forms = self.forms or (self.singular, self.plural)
        return forms[min(plural_index(self.lang, n), len(forms) - 1)]

    def format(self, **kwargs: object) -> str:
        return self.form(kwargs[self.count]).format(**kwargs)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.plural
