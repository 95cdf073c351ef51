"""A pydantic-ai agent as a lyra child: limits inside its run, and a continuation.

A triage agent (a real ``pydantic_ai.Agent``; its model is pydantic-ai's own
``FunctionModel`` playing a scripted conversation, so no network and no key)
reads logs and the issue tracker through tools. Its tools get lyra's
``ChildContext`` as the run's deps.

1. Recovery: the model connection drops after the agent has read the logs.
   ``recover`` (the loop behind ``delegate_with_retry``) sees ``partial`` and
   runs a continuation; the child hands pydantic-ai the first attempt's
   message history, so the second attempt does not read the logs again and
   finishes.
2. A token budget: an agent that never stops calling tools is ended by the
   request that ``Budget(max_tokens=3_000)`` has no room for (timeout / budget).
3. An idle timeout: a tool that hangs is ended after 0.3 s without progress
   (timeout / idle), though the deadline is 30 s away.

The script prints what happened and exits 0 when each run ended as it should.

Run: ``python examples/pydantic_ai_agent.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import sys

import anyio
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from lyra import Budget, ChildContext, Limits, Supervisor, events
from lyra.children.pydantic_ai import PydanticAIChild
from lyra.recovery import RecoveryPolicy, recover

TASK = "Triage issue 42: the nightly build fails"
reads: list[str] = []  # which logs the tools really read, attempt after attempt
dropped = False


def returned(messages: list[ModelMessage]) -> list[str]:
    """The tool results the model has seen so far."""
    return [
        str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def triage_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model's side: read the logs, then (after one dropped connection) conclude."""
    global dropped
    usage = RequestUsage(input_tokens=400, output_tokens=60)
    seen = returned(messages)
    if not seen:
        return ModelResponse([ToolCallPart("read_log", {"name": "nightly"})], usage=usage)
    if not dropped:
        dropped = True
        raise ConnectionResetError("connection reset by the model API")
    return ModelResponse([TextPart(f"Flaky test: {seen[0]}")], usage=usage)


agent = Agent(FunctionModel(triage_model), deps_type=ChildContext, name="triage")


@agent.tool
def read_log(ctx: RunContext[ChildContext], name: str) -> str:
    """Read a CI log."""
    reads.append(name)
    return "test_upload timed out after 30 s on runner 7"


def runaway_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model that never stops asking for more."""
    usage = RequestUsage(input_tokens=800, output_tokens=200)
    return ModelResponse([ToolCallPart("search_issues", {"query": "flaky"})], usage=usage)


runaway = Agent(FunctionModel(runaway_model), deps_type=ChildContext, name="runaway")


@runaway.tool_plain
def search_issues(query: str) -> str:
    """Search the issue tracker."""
    return "12 more issues mention it"


def stuck_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse([ToolCallPart("fetch_artifact", {"build": 1234})])


stuck = Agent(FunctionModel(stuck_model), deps_type=ChildContext, name="stuck")


@stuck.tool_plain
async def fetch_artifact(build: int) -> str:
    """Fetch a build artifact (its server never answers)."""
    await anyio.sleep(30)
    return "never"


async def main() -> bool:
    ok = True

    print("1. Recovery: the connection drops after the logs were read")
    outcome = await recover(
        TASK,
        child=PydanticAIChild(agent),
        policy=RecoveryPolicy(max_retries=2),
        limits=Limits(timeout=10),
    )
    for record in outcome.attempts:
        result = record.result
        what = "completed" if result.failure is None else str(result.failure.category)
        tokens = result.usage.tokens if result.usage else 0
        print(f"   attempt {record.number} [{record.strategy}]: {what}, {tokens} tokens")
    print(f"   output: {outcome.result.output}")
    print(f"   logs read: {reads} (once: the continuation resumed the conversation)")
    ok = ok and outcome.result.ok and reads == ["nightly"]
    ok = ok and [a.strategy for a in outcome.attempts] == ["initial", "continuation"]

    print("2. A runaway agent under Budget(max_tokens=3_000)")
    result = await Supervisor(PydanticAIChild(runaway), budget=Budget(max_tokens=3_000)).delegate(
        "Find every related issue", timeout=10
    )
    failure = result.failure
    assert failure is not None
    assert result.usage is not None
    print(f"   {failure.category}/{failure.error_type}: {failure.evidence}")
    print(f"   spent {result.usage.tokens} tokens in {result.usage.turns} turns")
    ok = ok and failure.error_type == "budget" and result.usage.tokens <= 3_000 + 1_000

    print("3. A stuck tool under idle_timeout=0.3")
    result = await Supervisor(PydanticAIChild(stuck)).delegate(
        "Fetch the artifact of build 1234", timeout=30, idle_timeout=0.3
    )
    failure = result.failure
    assert failure is not None
    what = f"{failure.category}/{failure.error_type}"
    print(f"   {what} after {result.duration:.1f}s: {failure.evidence}")
    ok = ok and failure.error_type == "idle" and result.duration < 5
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    if parser.parse_args().verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)
    if anyio.run(main):
        print("\nOK: the agent's run kept lyra's budget and idle timeout, and resumed its work")
        sys.exit(0)
    print("\nUNEXPECTED")
    sys.exit(1)
