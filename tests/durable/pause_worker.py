"""tests/durable/worker.py plus a `desk` service for the approvals of issue 30: `pay` (needs
approval, standing decisions apply) and `wire` (pauses itself with NeedsApproval until it is
approved). Same command line as worker.py.

Model script, by tag (the first user message): `always-*` pays p1..p6 (10, 20, 500, 30,
600, 40), one call per turn; `other-*` pays p1 (10); `raise-*` wires w1 to Bob."""

from __future__ import annotations

import worker  # tests/durable is on PYTHONPATH (conftest.Workers)

from toolweave import AiMessage, NeedsApproval, ScriptedChatModel, ToolContext, tool
from toolweave.chat.request import ChatRequest
from toolweave.durable import DurableToolService, QueueSpec

AMOUNTS = [10, 20, 500, 30, 600, 40]


@tool
def wire(tag: str, to: str, ctx: ToolContext) -> str:
    """Wire money (the tool asks for approval itself)."""
    worker.log(f"wire-run {tag} {to} {'approved' if ctx.approval is not None else 'none'}")
    if ctx.approval is None:
        raise NeedsApproval(f"a wire to {to}", {"to": to})
    return f"wired to {to}"


def desk_script(request: ChatRequest) -> AiMessage:
    tag = request.messages[0].text or ""  # type: ignore[union-attr]
    turn = sum(1 for m in request.messages if m.type == "ai")
    results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
    if tag.startswith("always-") and turn < len(AMOUNTS):
        call = worker._call("pay", f"p{turn + 1}", tag=tag, to="Bob", amount=AMOUNTS[turn])
        return AiMessage(tool_execution_requests=[call])
    if tag.startswith("other-") and turn == 0:
        return AiMessage(
            tool_execution_requests=[worker._call("pay", "p1", tag=tag, to="Bob", amount=10)]
        )
    if tag.startswith("raise-") and turn == 0:
        return AiMessage(tool_execution_requests=[worker._call("wire", "w1", tag=tag, to="Bob")])
    return AiMessage(f"{tag} finished: " + " | ".join(results))


_build = worker.build


def build(tool_queue: bool) -> None:
    _build(tool_queue)
    tq = (
        QueueSpec(worker.TOOLS, worker_concurrency=2, polling_interval=0.05) if tool_queue else None
    )
    cq = QueueSpec(worker.CONVERSATIONS, worker_concurrency=50, polling_interval=0.05)
    DurableToolService(
        "desk", model=ScriptedChatModel(desk_script), tool_queue=tq, conversation_queue=cq
    ).tools(worker.pay, wire)


worker.build = build

if __name__ == "__main__":
    worker.main()
