"""An OpenAI Agents SDK agent under lyra: a budget and an idle timeout inside the
SDK's run, and a recovery that resumes the agent's conversation.

The agent is an ordinary ``agents.Agent`` with a function tool; its model is the
SDK's own test double (``agents.testing.ScriptedModel``), so the script runs
offline, with no key. Part 1: the first attempt looks the protein up, then the
model endpoint resets the connection. A failure after a completed step is
``partial``; the recovery loop's continuation hands the agent back its
conversation (the tool's result included), so the second attempt answers
without calling the tool again. Part 2: an agent that never stops calling its
tool is stopped by the response that takes it over its token budget.

Run: ``python examples/openai_agents_agent.py [-v]`` (``-v`` shows lyra's events;
needs the ``openai-agents`` extra: ``pip install -e '.[openai-agents]'``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from agents import Agent, Usage, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from lyra import Budget, Limits, Supervisor, events, parse_report
from lyra.children.openai_agents import OpenAIAgentsChild
from lyra.recovery import RecoveryPolicy, recover

TASK = "How many residues does P04637 have?"
lookups: list[str] = []  # every call of the tool, across attempts


@function_tool
def lookup(protein_id: str) -> str:
    """Look a protein up in UniProt."""
    lookups.append(protein_id)
    return f"{protein_id}: TP53, 393 residues"


def usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def answer_from_history(call: Any) -> ModelStep:
    """Attempt 2's model: it answers from the tool result already in its input."""
    seen = [i.get("output") for i in call.input if i.get("type") == "function_call_output"]
    text = f"From the earlier lookup ({seen[0]}): 393 residues." if seen else "I need to look."
    return ModelStep(output=[assistant_message(text)], usage=usage(300, 20))


async def part_one() -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(
        [
            ModelStep(
                output=[function_call("lookup", {"protein_id": "P04637"}, call_id="call_1")],
                usage=usage(120, 15),
            ),
            ModelStep.raise_error(ConnectionResetError("the model endpoint reset the connection")),
            ModelStep.respond(answer_from_history),
        ]
    )
    agent = Agent(name="researcher", instructions="Answer with facts.", model=model, tools=[lookup])
    outcome = await recover(
        TASK,
        child=OpenAIAgentsChild(agent),
        policy=RecoveryPolicy(max_retries=2),
        limits=Limits(timeout=10, idle_timeout=5, budget=Budget(max_tokens=5_000, max_turns=6)),
    )
    return outcome, model


async def part_two() -> Any:
    def keep_looking(call: Any) -> ModelStep:
        n = len(call.input)
        return ModelStep(
            output=[function_call("lookup", {"protein_id": "P04637"}, call_id=f"call_{n}")],
            usage=usage(400, 10),
        )

    model = ScriptedModel([ModelStep.respond(keep_looking) for _ in range(20)])
    agent = Agent(name="looper", instructions="Look again.", model=model, tools=[lookup])
    child = OpenAIAgentsChild(agent, max_turns=None)  # no SDK limit: lyra's budget holds
    supervisor = Supervisor(child, budget=Budget(max_tokens=1_000), idle_timeout=5)
    return await supervisor.delegate(TASK, timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)
    set_tracing_disabled(True)  # the SDK's own tracing would export to OpenAI's backend

    outcome, model = anyio.run(part_one)
    print("Part 1: a partial failure, then a continuation of the conversation")
    for record in outcome.attempts:
        failure = record.result.failure
        what = f"failed ({failure.category}): {failure.message}" if failure else "completed"
        print(f"  attempt {record.number} [{record.strategy}]: {what}")
    resumed = model.last_call.input if model.last_call is not None else []
    carried = [i.get("type", i.get("role")) for i in resumed]
    print(f"  attempt 2's model input: {carried}")
    final = parse_report(outcome.report)
    print(f"  final report: status={final.status} attempt={final.attempt}")
    print(f"  attempt 2: tokens={final.tokens_used} turns={final.turns}")
    first_part_lookups = len(lookups)
    print(f"  tool calls, both attempts: {first_part_lookups}")
    print(f"  output: {final.output}")

    lookups.clear()
    result = anyio.run(part_two)
    failure = result.failure
    print("\nPart 2: a runaway agent and a token budget of 1,000")
    print(f"  {failure.category}/{failure.error_type}: {failure.evidence}")
    spent = result.usage.input_tokens + result.usage.output_tokens
    print(f"  spent {spent} tokens in {result.usage.turns} model calls; tool calls: {len(lookups)}")

    ok = (
        final.status == "completed"
        and final.attempt == 2
        and "function_call_output" in carried
        and first_part_lookups == 1  # the continuation did not redo the lookup
        and (failure.category, failure.error_type) == ("timeout", "budget")
        and spent <= 1_000 + 410
    )
    print("OK: the limits held inside the SDK's run" if ok else "UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
