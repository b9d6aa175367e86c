"""Docstring parsing: summary and per-parameter descriptions, style detected automatically."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from functools import lru_cache

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
    their line breaks folded into single spaces. `name (type): text` entries work.
    """
    if not doc or not doc.strip():
        return ParsedDocstring()
    cleaned = inspect.cleandoc(doc)
    parsed = docstring_parser.parse(cleaned, docstring_parser.DocstringStyle.AUTO)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    description = "\n\n".join(p.strip() for p in parts)
    params: dict[str, str] = {}
    for p in parsed.params:
        if p.arg_name and p.description:
            name = p.arg_name.lstrip("*").split(" ")[0]
            params[name] = " ".join(p.description.split())
    returns = parsed.returns.description if parsed.returns else None
    return ParsedDocstring(description=description, params=params, returns=returns)
