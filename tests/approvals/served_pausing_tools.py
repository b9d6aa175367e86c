"""Tools served by `toolweave mcp serve` in tests/approvals/test_mcp_pauses.py: `wire` pauses
itself with NeedsApproval until it is approved."""

from toolweave import NeedsApproval, ToolContext, tool


@tool
def wire(to: str, ctx: ToolContext) -> str:
    """Wire money to someone (asks for approval itself)."""
    if ctx.approval is None:
        raise NeedsApproval(f"a wire to {to}")
    return f"wired to {to} (approved)"
