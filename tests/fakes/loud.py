"""A child whose module prints as it loads and whose class prints as it is built (a
fixture built for the MCP stdio test: such output must never reach the protocol)."""

from __future__ import annotations

from typing import Any

print("loud module: printed at import")


class Child:
    """Prints when constructed; answers with the prompt."""

    def __init__(self) -> None:
        print("loud child: printed when built")

    async def run(self, prompt: str, ctx: Any) -> str:
        return f"heard: {prompt}"


child = Child()
