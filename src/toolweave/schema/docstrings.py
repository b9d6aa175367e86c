"""Docstring parsing: summary and per-parameter descriptions, style detected automatically."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docstring_parser

__all__ = ["ParsedDocstring", "parse_docstring"]


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    """The parts of a docstring a tool needs."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)
    returns: str | None = None


@lru_cache(maxsize=1024)
def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Parse a Google, NumPy or Sphinx (reST) docstring, whichever style it is written in.

    The description is the summary paragraph(s) before the first section; parameter texts keep
    their line breaks folded into single spaces. `name (type): text` entries work. Never
    raises: a style that cannot read the text gives way to the next, and a text none can
    read is the description as it is (with no parameter texts).
    """
    if not doc or not doc.strip():
        return ParsedDocstring()
    cleaned = inspect.cleandoc(doc)
    try:
        return _read(_parse(cleaned))
    except Exception:  # a docstring must never prevent declaring a tool
        return ParsedDocstring(description=cleaned)


def _read(parsed: docstring_parser.Docstring) -> ParsedDocstring:
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    description = "\n\n".join(p.strip() for p in parts)
    params: dict[str, str] = {}
    for p in parsed.params:
        if p.arg_name and p.description:
            name = p.arg_name.lstrip("*").split(" ")[0]
            params[name] = " ".join(p.description.split())
    returns = parsed.returns.description if parsed.returns else None
    return ParsedDocstring(description=description, params=params, returns=returns)


_OTHER_STYLES = re.compile(r"^[ \t]*(:|@|\.\.|-{3,}[ \t]*$|={3,}[ \t]*$)", re.M)
"""A line only reST (`:param`), Epydoc (`@param`) or NumPy (underlined titles) sections have."""
_SECTION_TITLE = re.compile(r":[ \t\r\f\v]*$", re.M)
"""A line ending in a colon: what a Google section title needs."""


def _parse(text: str) -> docstring_parser.Docstring:
    """`docstring_parser.parse(text)` (AUTO: every style is tried, the one finding the most
    sections wins, the first on a tie), without running the parsers that cannot win."""
    import docstring_parser  # loaded when first needed (import time)
    from docstring_parser import google, rest

    if _OTHER_STYLES.search(text) is None:
        if _SECTION_TITLE.search(text) is None:
            return rest.parse(text)  # no style finds a section: AUTO picks reST's result
        try:
            parsed = google.parse(text)
        except docstring_parser.ParseError:
            pass  # e.g. `Args:` over a bare `None`: AUTO tries the other styles
        else:
            if parsed.meta:  # the others find nothing: Google wins
                return parsed
    return docstring_parser.parse(text, docstring_parser.DocstringStyle.AUTO)
