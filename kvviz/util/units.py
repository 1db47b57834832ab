"""Numbers for people: binary byte units, exact bytes, token counts, JSON-friendly numbers.

The one byte formatter of kvviz (pages, figures and the CLI all call ``format_bytes``); no UI text here.
"""

from __future__ import annotations

from fractions import Fraction

GIB = 1 << 30

# ---------------------------------------------------------------------------------------------
# Formatting (binary units, exact bytes)
# ---------------------------------------------------------------------------------------------

_UNITS: tuple[tuple[str, int], ...] = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def as_number(value: Fraction | int) -> int | float:
    """An int when the value is whole, else a float (for JSON)."""
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else float(value)


def ratio(value: Fraction | None) -> float | None:
    """A ratio rounded to 4 decimals for JSON (None stays None)."""
    return None if value is None else round(float(value), 4)


def format_plain(value: Fraction | int) -> str:
    """An exact number with separators, or its float when it is not whole: ``1,024``, ``0.5``."""
    value = Fraction(value)
    if value.denominator == 1:
        return f"{value.numerator:,}"
    return f"{float(value):g}"


def format_value(value: Fraction | int | float) -> str:
    """A number with thousands separators: exact up to 3 decimals, else ``≈`` and 2 decimals."""
    v = Fraction(value)
    if v.denominator == 1:
        return f"{v.numerator:,}"
    if (v * 1000).denominator == 1:
        return f"{float(v):,.3f}".rstrip("0").rstrip(".")
    return "≈" + f"{float(v):,.2f}".rstrip("0").rstrip(".")


def format_bytes(value: Fraction | int | float) -> str:
    """Binary units: ``512 KiB``, ``500 MiB``, ``≈48.83 GiB``, ``900 B``. ``≈`` marks a rounded value."""
    v = Fraction(value)
    for unit, size in _UNITS:
        if abs(v) >= size:
            return f"{format_value(v / size)} {unit}"
    return f"{format_value(v)} B"


def format_exact(value: Fraction | int | float) -> str:
    """Exact bytes with separators: ``524,288 B`` (fractions of a byte shown as decimals)."""
    v = Fraction(value)
    if v.denominator == 1:
        return f"{v.numerator:,} B"
    return f"{float(v):,} B"
