"""A Google ADK agent bare vs inside lyra: what ``GoogleADKChild`` costs per run.

The agent: an ``LlmAgent`` with one async tool, on a fake ``BaseLlm`` of this
benchmark's own, scripted to call the tool twice, then answer (three model
requests, two tool calls a run, usage metadata on each response). The sides
(``_framework`` runs them, interleaved), each run in a session of its own:

- **bare**: ADK's ``Runner`` over an ``App`` of the agent with an
  ``InMemorySessionService``, as the child runs it: a session created, the
  run's events read to the end (``run_async`` in ``aclosing``), the last final
  response's text taken, the session deleted;
- **bare + hook**: the same with a ``BasePlugin`` that does nothing in the app
  (a plugin, ADK's app-wide extension point, is what lyra's child holds the
  limits with);
- **lyra**: ``adelegate_task(prompt, child=GoogleADKChild(agent), ...)``;
- **plain child**: ``adelegate_task`` around a child that awaits the bare run.
- **floor child**: the least a supervisor does around the same run (``_framework``).
- **floor + hook**: the floor of lyra's child: the floor child around the run with
  a plugin holding the same limits in the least code (``_framework.FloorMeter``).

Targets: lyra's share (lyra − bare + hook) ≤ 150 µs CPU per run; with a model
taking 20 ms per request, lyra ≤ 1.01× bare in wall time.

    python benchmarks/framework_google_adk.py [--quick | --smoke] [--json FILE]
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator
from typing import Any

import orjson
from _common import Row, Size, standalone
from _framework import FloorMeter, Framework, Run, Sides, measure, text_size

ANSWER = "Duplicate of #7"
USER = "lyra"
OUTPUT = 4096  # the output lyra's child holds for a request without max_tokens (ADK's default)


def build_agent(latency: float) -> Any:
    """The agent: two tool calls, then the answer; each request takes ``latency`` s."""
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class Scripted(BaseLlm):
        """Calls ``lookup`` until two results are in, then answers."""

        model: str = "scripted"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            if latency:
                await asyncio.sleep(latency)
            results = sum(
                part.function_response is not None
                for content in llm_request.contents
                for part in content.parts or ()
            )
            call = types.FunctionCall(name="lookup", args={"issue": 42 + results})
            part = types.Part(text=ANSWER) if results >= 2 else types.Part(function_call=call)
            usage = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=400 + 100 * results, candidates_token_count=40
            )
            content = types.Content(role="model", parts=[part])
            yield LlmResponse(content=content, usage_metadata=usage)

    async def lookup(issue: int) -> str:
        """Look an issue up."""
        return f"issue {issue}: the nightly build fails"

    return LlmAgent(name="triage", model=Scripted(), tools=[lookup])


def runner(agent: Any, plugins: list[Any]) -> Run:
    """A run on ADK's own runner, in a session of its own, as the child makes it."""
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    sessions = InMemorySessionService()
    app = App(name=agent.name, root_agent=agent, plugins=plugins)
    adk = Runner(app=app, session_service=sessions)

    async def run(prompt: str) -> str:
        session = await sessions.create_session(app_name=app.name, user_id=USER)
        final = None
        try:
            events = adk.run_async(
                user_id=USER, session_id=session.id, new_message=types.UserContent(prompt)
            )
            async with contextlib.aclosing(events) as stream:
                async for event in stream:
                    if not event.partial and event.is_final_response():
                        final = event
        finally:
            await sessions.delete_session(app_name=app.name, user_id=USER, session_id=session.id)
        parts = final.content.parts if final and final.content and final.content.parts else []
        return "".join(part.text or "" for part in parts)

    return run


def build(latency: float) -> Sides:
    from google.adk.plugins.base_plugin import BasePlugin

    from lyra.children.google_adk import GoogleADKChild

    agent = build_agent(latency)
    nothing = BasePlugin(name="nothing")  # every callback of its own returns None

    class FloorPlugin(BasePlugin):
        """The floor's hook: :class:`FloorMeter`'s limits in a plugin (the meter of the
        run under way: the harness runs one at a time), the request's size measured as
        lyra's child measures it (each part's text, a call's arguments or a function's
        response as JSON)."""

        meter: FloorMeter
        tokens = 0

        async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
            sent = 0
            for content in llm_request.contents:
                for part in content.parts or ():
                    if part.text:
                        sent += text_size(part.text)
                    for data in (part.function_call, part.function_response):
                        if data is not None:
                            payload = getattr(data, "args", None) or getattr(data, "response", None)
                            if payload:
                                sent += len(orjson.dumps(payload, default=str))
            self.meter.before(sent, OUTPUT)

        async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> None:
            usage = llm_response.usage_metadata
            if usage is not None:
                self.tokens += (usage.prompt_token_count or 0) + (usage.candidates_token_count or 0)
            self.meter.after(self.tokens)

        async def before_tool_callback(self, **kwargs: Any) -> None:
            self.meter.progress()

        async def after_tool_callback(self, **kwargs: Any) -> None:
            self.meter.progress()

    floor = FloorPlugin(name="floor")
    floor_run = runner(agent, [floor])

    async def floor_hooked(prompt: str, meter: FloorMeter) -> str:
        floor.meter, floor.tokens = meter, 0
        return await floor_run(prompt)

    return Sides(
        runner(agent, []),
        runner(agent, [nothing]),
        GoogleADKChild(agent),
        floor_hooked=floor_hooked,
    )


FRAMEWORK = Framework(
    bench="framework_google_adk",
    build=build,
    prompt="Triage issue 42",
    answer=ANSWER,
    per_run="3 model requests, 2 tool calls",
    requests=3,
    hook="a do-nothing BasePlugin",
)


def run(size: Size) -> list[Row]:
    return measure(FRAMEWORK, size)


def main(argv: list[str] | None = None) -> None:
    standalone(run, __doc__, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
