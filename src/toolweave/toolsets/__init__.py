"""Toolsets: what offers tools to the model, step by step, and transforms over them
(docs/toolsets.md).

Layer: above `tools`, `execution` and `chat`; below `service`, `mcp` and `http`.
"""

from .abstract import ToolNameConflictError, Toolset, ToolsetTool
from .approval import ApprovalRequiredToolset
from .choosing import ChoosingToolset
from .combined import CombinedToolset
from .filtered import FilteredToolset
from .function import FunctionToolset
from .guarded import GuardedToolset
from .limited import LimitedToolset
from .prefixed import PrefixedToolset
from .prepared import PreparedToolset
from .renamed import RenamedToolset
from .searchable import SearchableToolset
from .source import NameFilter, SourceToolset
from .step import StepContext
from .wrapped import WrappedToolset
from .wrapper import WrapperToolset

__all__ = [
    "ApprovalRequiredToolset",
    "ChoosingToolset",
    "CombinedToolset",
    "FilteredToolset",
    "FunctionToolset",
    "GuardedToolset",
    "LimitedToolset",
    "NameFilter",
    "PrefixedToolset",
    "PreparedToolset",
    "RenamedToolset",
    "SearchableToolset",
    "SourceToolset",
    "StepContext",
    "ToolNameConflictError",
    "Toolset",
    "ToolsetTool",
    "WrappedToolset",
    "WrapperToolset",
]
