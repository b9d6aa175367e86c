"""`ToolExecutionRequest`: one tool call as the model asked for it."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..schema.arguments import parse_arguments

__all__ = ["ToolExecutionRequest"]


class ToolExecutionRequest(BaseModel):
    """A tool call: its id, the tool's name and the raw JSON argument string from the model."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    name: str
    arguments: str = "{}"

    def arguments_as_dict(self) -> dict[str, Any]:
        """Parse the arguments (with the repair pass); raises `ToolArgumentsError`."""
        return parse_arguments(self.arguments, tool_name=self.name)
