"""A Google ADK agent under lyra: a budget and an idle timeout that hold inside ADK's
run, and a retry that picks the work up where it stopped.

The agent is an ordinary ADK ``LlmAgent`` with a tool, run by ADK's own runner;
its model is a scripted implementation of ADK's model interface (``BaseLlm``)
so the example runs offline (a real application passes ``model="gemini-2.5-flash"``;
nothing else changes). Three runs:

1. A runaway agent that never stops calling its tool, under
   ``Budget(max_tokens=1_000)``: lyra's plugin charges each response's
   ``usage_metadata`` as it arrives and stops the run at the one that crosses
   the limit (``timeout`` / ``budget``, the spend in the report).
2. A tool that hangs, under ``idle_timeout=0.3``: no progress, so lyra ends the
   run (``timeout`` / ``idle``) long before its 30 s deadline.
3. The model API fails (HTTP 503) after the agent looked a protein up
   (``partial``); ``adelegate_with_retry`` sends a continuation, whose session
   replays the first attempt's events, so the lookup is not done again.

The script prints what happened and exits 0 when every run behaved.

Run: ``python examples/google_adk_agent.py [-v]`` (``-v`` shows lyra's events).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import anyio
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import errors, types
from pydantic import PrivateAttr

from lyra import Budget, adelegate_task, adelegate_with_retry, events, parse_report
from lyra.children.google_adk import GoogleADKChild
from lyra.recovery import RecoveryPolicy


class ScriptedGemini(BaseLlm):
    """ADK's model interface, answering a scripted conversation (an exception in the
    script is raised, as the real Gemini model raises google-genai's errors)."""

    model: str = "gemini-2.5-flash"
    _script: Iterator[Any] = PrivateAttr()
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    @classmethod
    def of(cls, script: Iterator[Any]) -> ScriptedGemini:
        llm = cls()
        llm._script = script
        return llm

    @property
    def requests(self) -> list[LlmRequest]:
        return self._requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        turn = next(self._script)
        if isinstance(turn, BaseException):
            raise turn
        yield turn


def lookup_call(name: str = "lookup") -> LlmResponse:
    """A model turn asking for a tool (300 tokens in, 50 out)."""
    call = types.FunctionCall(name=name, args={"protein": "P04637"})
    return _response(types.Part(function_call=call), 300, 50)


def answer(text: str) -> LlmResponse:
    return _response(types.Part(text=text), 400, 30)


def _response(part: types.Part, prompt: int, candidates: int) -> LlmResponse:
    usage = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt, candidates_token_count=candidates
    )
    return LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def part_kind(content: types.Content) -> str:
    """What a turn of the conversation holds: text, a function call or its response."""
    part = (content.parts or [types.Part()])[0]
    if part.function_call:
        return "function_call"
    return "function_response" if part.function_response else f"{content.role} text"


def unavailable() -> errors.ServerError:
    return errors.ServerError(503, {"error": {"code": 503, "status": "UNAVAILABLE"}})


looked_up: list[str] = []


def lookup(protein: str) -> str:
    """Look a protein up."""
    looked_up.append(protein)
    return f"{protein}: tumour suppressor p53, 393 residues"


async def stuck_lookup(protein: str) -> str:
    """A lookup whose service never answers."""
    await anyio.sleep(3600)
    return "never"


def agent(script: Iterator[Any], *tools: Any) -> tuple[LlmAgent, ScriptedGemini]:
    model = ScriptedGemini.of(script)
    return LlmAgent(name="analyst", model=model, instruction="Analyse.", tools=list(tools)), model


def forever(turn: LlmResponse) -> Iterator[LlmResponse]:
    while True:
        yield turn.model_copy(deep=True)


async def main() -> int:
    ok = True

    # 1. A runaway agent, stopped by a token budget inside ADK's run.
    runaway, _ = agent(forever(lookup_call()), lookup)
    report = await adelegate_task(
        "Describe P04637", child=GoogleADKChild(runaway), timeout=30,
        budget=Budget(max_tokens=1_000),
    )  # fmt: skip
    parsed = parse_report(report)
    print(f"runaway: {parsed.category}/{parsed.error_type}, {parsed.tokens_used} tokens used")
    ok &= (parsed.category, parsed.error_type, parsed.tokens_used) == ("timeout", "budget", 1050)

    # 2. A tool that hangs, ended by the idle timeout.
    hanging, _ = agent(iter([lookup_call("stuck_lookup")]), stuck_lookup)
    report = await adelegate_task(
        "Describe P04637", child=GoogleADKChild(hanging), timeout=30, idle_timeout=0.3
    )
    parsed = parse_report(report)
    print(f"stuck tool: {parsed.category}/{parsed.error_type} ({parsed.duration:.1f}s)")
    ok &= (parsed.category, parsed.error_type) == ("timeout", "idle")

    # 3. The model API fails after a lookup; the continuation goes on from there.
    looked_up.clear()
    script = iter([lookup_call(), unavailable(), answer("P04637 is p53, 393 residues long.")])
    flaky, model = agent(script, lookup)
    report = await adelegate_with_retry(
        "Describe P04637", child=GoogleADKChild(flaky), base_timeout=30,
        policy=RecoveryPolicy(max_retries=2, jitter=0.0, backoff_base=0.01),
    )  # fmt: skip
    parsed = parse_report(report)
    resumed = [part_kind(c) for c in model.requests[2].contents]
    print(f"continuation: status={parsed.status} attempt={parsed.attempt}")
    print(f"the retry's model saw: {', '.join(r or '?' for r in resumed)}")
    print(f"lookups made: {len(looked_up)}")
    ok &= (parsed.status, parsed.attempt, len(looked_up)) == ("completed", 2, 1)

    print("OK: every run behaved" if ok else "FAILED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="show lyra's events")
    if parser.parse_args().verbose:
        events.configure(structlog=True)
    else:  # ADK logs every model failure with its traceback; lyra's report says it here
        logging.getLogger("google_adk").setLevel(logging.CRITICAL)
    sys.exit(asyncio.run(main()))
