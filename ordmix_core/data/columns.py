"""The columns of a ratings table: their accepted names (crowd-kit's ``worker, task, label``
among them), the required ones, and how a name with invisible characters is shown."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from ..errors import InputError

#: accepted column names -> canonical name (crowd-kit's worker/task/label included)
COLUMN_ALIASES = {
    "annotator": "annotator",
    "worker": "annotator",
    "instance": "instance",
    "task": "instance",
    "item": "instance",
    "rating": "rating",
    "label": "rating",
    "query": "query",
}

#: column names of a gold-standard file -> canonical name
GOLD_ALIASES = {
    "instance": "instance",
    "task": "instance",
    "item": "instance",
    "truth": "truth",
    "true_label": "truth",
    "label": "truth",
    "gold": "truth",
}

REQUIRED = ("annotator", "instance", "rating")

ID_COLUMNS = ("annotator", "instance", "query")

#: the characters ``str.strip()`` removes (``str.isspace``), for pyarrow's trim
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def visible(text: object) -> str:
    """``text`` for a message: as is, or quoted with escapes when it holds invisible characters
    (a zero-width space, a non-breaking space, a leading or trailing blank)."""
    s = str(text)
    return s if s.isprintable() and s == s.strip() else repr(s)


def _invisible_hint(names: Sequence[str]) -> str:
    """``; column '\\u200bannotator' holds U+200B (ZERO WIDTH SPACE): ...`` for odd names."""
    for n in names:
        odd = sorted({ch for ch in n if not ch.isprintable()})
        if odd:
            chars = ", ".join(
                f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')})" for ch in odd[:3]
            )
            return (
                f"; column {n!r} holds invisible character(s) {chars}: delete them from the header"
            )
    return ""


def map_aliases(columns: Sequence[object], aliases: dict[str, str], source: str) -> dict:
    """Column name -> canonical name for the columns that are aliases (case-insensitive).

    Two columns meaning the same thing (say ``worker`` and ``annotator``) are an InputError.
    """
    mapping: dict = {}
    for c in columns:
        canon = aliases.get(str(c).strip().lower())
        if canon is None:
            continue
        if canon in mapping.values():
            other = next(k for k, v in mapping.items() if v == canon)
            raise InputError(
                f"columns {other!r} and {c!r} both mean {canon!r}; keep one of them",
                source=source,
            )
        mapping[c] = canon
    return mapping


def _is_arrow(x: object) -> bool:
    return type(x).__module__.startswith("pyarrow")
