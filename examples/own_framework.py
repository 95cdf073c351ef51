"""A framework lyra ships no child for, wrapped on lyra's public API alone.

``TinyAgent`` below stands for any agent framework with hooks around its model
requests and tool calls (smolagents, a house framework, …): a synchronous loop
that asks its model, runs the tool the model names, and stops at an answer or
at its own ``max_steps``. ``TinyAgentChild`` holds lyra's limits inside its run
the way lyra's own framework children do (docs/frameworks/your-own.md says
why each call is where it is). Runs offline:

    python examples/own_framework.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from lyra import Budget, ChildContext, TaskReport, delegate_task, parse_report
from lyra.children import Price, price_of
from lyra.errors import BudgetExhausted

# -- the framework (not lyra's) ---------------------------------------------------------


@dataclass
class Reply:
    """One model response: a tool call or an answer, and its token usage."""

    tool: str | None = None
    answer: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class TinyAgent:
    """A model (``messages -> Reply``), tools by name, and hooks around both."""

    model: Callable[[list[str]], Reply]
    model_name: str
    tools: dict[str, Callable[[], str]]
    max_steps: int = 10
    before_model: list[Callable[[], None]] = field(default_factory=list)
    after_model: list[Callable[[Reply], None]] = field(default_factory=list)
    around_tool: list[Callable[[str, Callable[[], str]], str]] = field(default_factory=list)

    def run(self, task: str) -> str:
        messages = [task]
        for _ in range(self.max_steps):
            for hook in self.before_model:
                hook()
            reply = self.model(messages)
            for after in self.after_model:
                after(reply)
            if reply.answer is not None:
                return reply.answer
            call = self.tools[reply.tool or ""]
            for around in self.around_tool:
                call = _bound(around, reply.tool or "", call)
            messages.append(call())
        raise MaxStepsReached(f"agent stopped after max_steps={self.max_steps}")


def _bound(around: Callable[..., str], name: str, call: Callable[[], str]) -> Callable[[], str]:
    return lambda: around(name, call)


class MaxStepsReached(Exception):
    """The framework's own limit of steps."""


# -- the child: lyra's limits inside the framework's run -------------------------------


class TinyAgentChild:
    """A ``TinyAgent`` as a lyra child. The framework is synchronous, so its run goes to
    a worker thread, which a deadline abandons (Python cannot stop a thread): the
    thread's next charge ahead is then refused, so it sends no more requests."""

    def __init__(self, agent: TinyAgent, *, prices: dict[str, Price] | None = None) -> None:
        self.agent = agent
        self.price = price_of(agent.model_name, prices)

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        return await anyio.to_thread.run_sync(self._run, prompt, ctx, abandon_on_cancel=True)

    def _run(self, prompt: str, ctx: ChildContext) -> str:
        agent = self.agent
        hooks = (self._before(ctx), self._after(ctx), self._around(ctx))
        agent.before_model.append(hooks[0])
        agent.after_model.append(hooks[1])
        agent.around_tool.append(hooks[2])
        try:
            answer = agent.run(prompt)
        except MaxStepsReached as exc:  # the framework's own limit: timeout / budget
            raise BudgetExhausted(str(exc)) from exc
        except Exception:
            ctx.raise_if_stopped()  # a stop the framework caught wins over what it raised
            raise
        finally:  # (the agent is the user's: leave it as it was)
            agent.before_model.remove(hooks[0])
            agent.after_model.remove(hooks[1])
            agent.around_tool.remove(hooks[2])
        ctx.raise_if_stopped()  # a stop (a tool's ctx.block) the framework answered past
        return answer

    @staticmethod
    def _before(ctx: ChildContext) -> Callable[[], None]:
        def before_model() -> None:
            ctx.raise_if_stopped()  # a blocker, a loop, the tree's budget run out meanwhile
            ctx.take_turn()  # charged ahead: a spent budget refuses the request

        return before_model

    def _after(self, ctx: ChildContext) -> Callable[[Reply], None]:
        price = self.price

        def after_model(reply: Reply) -> None:
            cost = 0.0
            if price is not None:
                cost = price.of_tokens(
                    input_tokens=reply.input_tokens, output_tokens=reply.output_tokens
                )
            ctx.charge(reply.input_tokens, reply.output_tokens, cost)  # also a sign of life

        return after_model

    @staticmethod
    def _around(ctx: ChildContext) -> Callable[[str, Callable[[], str]], str]:
        def around_tool(name: str, call: Callable[[], str]) -> str:
            ctx.tool_started(name)  # progress; counts repeats and the tool-call budget
            try:
                result = call()
            except Exception as exc:
                ctx.tool_ended(name, exc)
                raise
            ctx.tool_ended(name)
            ctx.step(f"Ran {name}")
            return result

        return around_tool


# -- trying it ----------------------------------------------------------------------------


def scripted(replies: list[Reply]) -> Callable[[list[str]], Reply]:
    """A model that answers with ``replies`` in turn (the last one again at the end)."""
    sent = iter(replies)
    last = replies[-1]
    return lambda messages: next(sent, last)


def agent(replies: list[Reply], **tools: Callable[[], str]) -> TinyAgent:
    return TinyAgent(scripted(replies), "tiny-1", tools or {"lookup": lambda: "found it"})


def summary(parsed: TaskReport) -> str:
    if parsed.status == "completed":
        return f"completed: {parsed.output!r}, {parsed.tokens_used} tokens, ${parsed.cost_usd}"
    return f"{parsed.category}/{parsed.error_type}: {parsed.message}"


def main() -> int:
    prices = {"tiny-": Price(input=1.0, output=5.0)}
    lookup = Reply(tool="lookup", input_tokens=400, output_tokens=20)
    done = Reply(answer="Duplicate of #7", input_tokens=500, output_tokens=10)
    child = TinyAgentChild(agent([lookup, done]), prices=prices)
    answered = parse_report(delegate_task("Triage issue 42", child=child, timeout=10))
    print("answer:", summary(answered))

    runaway = TinyAgentChild(agent([lookup]), prices=prices)
    budget = Budget(max_turns=3)
    spent = parse_report(delegate_task("Triage", child=runaway, timeout=10, budget=budget))
    print("budget:", summary(spent), f"(turns: {spent.turns})")

    steps = parse_report(delegate_task("Triage", child=runaway, timeout=10))
    print("max steps:", summary(steps))

    def stuck() -> str:
        time.sleep(1.5)  # a hung service call (its thread is abandoned at the idle timeout)
        return "late"

    hung = TinyAgentChild(agent([lookup], lookup=stuck))
    idle = parse_report(delegate_task("Triage", child=hung, timeout=10, idle_timeout=0.5))
    print("stuck tool:", summary(idle))
    ok = (
        answered.tokens_used == 930
        and (spent.category, spent.error_type, spent.turns) == ("timeout", "budget", 3)
        and (steps.category, steps.error_type) == ("timeout", "budget")
        and (idle.category, idle.error_type) == ("timeout", "idle")
    )
    print("OK: lyra's limits held inside the framework's run" if ok else "UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
