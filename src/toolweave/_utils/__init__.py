"""Private helpers shared by several layers."""
