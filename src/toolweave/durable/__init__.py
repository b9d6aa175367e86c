"""Durable, distributed conversations on DBOS (extra `durable`; see docs/durable.md).

`DurableToolService` runs each conversation as a DBOS workflow recorded in PostgreSQL:
model calls and tool calls are steps, so a restarted (or another) worker resumes it where
it stopped. The core library never imports this package.
"""

from __future__ import annotations

try:
    import dbos as _dbos  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "toolweave.durable needs DBOS: install the extra with `pip install 'toolweave[durable]'`"
    ) from e

from .ops import ConversationClient, ConversationInfo, DecisionConflictError, StepRecord
from .service import (
    CONVERSATION_WORKFLOW_PREFIX,
    DECISION_TOPIC,
    PENDING_EVENT,
    PROGRESS_EVENT,
    RERUN,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_WORKFLOW_PREFIX,
    ConversationFailedError,
    ConversationHandle,
    DurableDatabaseError,
    DurableToolService,
    QueueSpec,
    Reconciler,
    UnknownOutcome,
    launch,
    recover,
    shutdown,
)

__all__ = [
    "CONVERSATION_WORKFLOW_PREFIX",
    "DECISION_TOPIC",
    "PENDING_EVENT",
    "PROGRESS_EVENT",
    "RERUN",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_WORKFLOW_PREFIX",
    "ConversationClient",
    "ConversationFailedError",
    "ConversationHandle",
    "ConversationInfo",
    "DecisionConflictError",
    "DurableDatabaseError",
    "DurableToolService",
    "QueueSpec",
    "Reconciler",
    "StepRecord",
    "UnknownOutcome",
    "launch",
    "recover",
    "shutdown",
]
