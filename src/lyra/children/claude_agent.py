"""Claude Agent SDK agents as lyra children: ``ClaudeAgentChild(options)``.

Install the ``claude-agent-sdk`` extra (``pip install -e '.[claude-agent-sdk]'`` in
a lyra checkout, or ``pip install 'claude-agent-sdk>=0.2.180,<0.3'``; the SDK's wheel
bundles the Claude Code CLI, about 400 MB installed). An agent of the Claude
Agent SDK *is* its ``ClaudeAgentOptions`` (model, system prompt, tools, MCP
servers, subagents, hooks); it goes in unchanged and runs as it would under
``ClaudeSDKClient``, with the tree's limits inside the run::

    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool
    from lyra import Budget, adelegate_task
    from lyra.children.claude_agent import ClaudeAgentChild, current_context

    @tool("lookup", "Look a protein up", {"protein_id": str})
    async def lookup(args):
        ctx = current_context()               # the run's ChildContext
        helper = await ctx.delegate("Find its isoforms", child=other_child)
        return {"content": [{"type": "text", "text": helper.output or "none"}]}

    agent = ClaudeAgentOptions(
        model="claude-sonnet-4-6",
        mcp_servers={"bio": create_sdk_mcp_server("bio", tools=[lookup])},
        allowed_tools=["mcp__bio__lookup"],
        max_turns=20,
    )
    report = await adelegate_task("How reliable is P04637?", child=ClaudeAgentChild(agent),
                                  timeout=600, idle_timeout=60, budget=Budget(max_tokens=200_000))

What holds inside the run (a copy of the options is changed, never yours):

- **Turns** are charged *ahead*, from the CLI's own hooks, before each model
  request it makes: ``UserPromptSubmit`` (the first), ``PostToolBatch`` (the
  one after each batch of tool calls, but the batch that gave ``output_format``'s
  answer, after which the CLI ends), ``SubagentStart`` (a subagent's first).
  A spent account answers the hook with ``continue: false``: the request is
  never sent, and the CLI stops by itself. A response that no hook announced
  (the CLI's own continuation after ``max_tokens``) is counted as a turn when
  it arrives.
- **Usage** is charged as each model response arrives, once per response,
  from the responses themselves (one source; the result's totals are never
  added, so nothing is counted twice): the main agent's stream events give a
  response's input tokens at its start and its output tokens at its end;
  a subagent's responses, whose stream events the CLI does not relay, are
  charged from their ``AssistantMessage`` (input exact, output as counted at the
  response's start). Cost comes from lyra's price table (``prices=`` adds
  models); the CLI's ``total_cost_usd`` is not used because on a resumed
  session it includes the earlier attempts' spend. The tree's limits are also
  folded into the CLI's own: ``max_turns``, ``max_budget_usd`` (the smaller of
  yours and what the tree has left) and ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` (at
  most the tokens left), a backstop for what lyra cannot see.
- **Progress**: every message from the CLI is a heartbeat; every tool call
  (built-in, MCP, a subagent's) is ``ctx.tool_started`` when the model's
  ``tool_use`` arrives and ``ctx.tool_ended`` with its ``tool_result`` (a failure
  when ``is_error``), a successful one a completed step; so the idle timeout
  sees a stuck tool. (The stream, not the ``PreToolUse`` / ``PostToolUse`` hooks:
  the CLI waits for a hook's answer, and the stream costs it nothing.)
- **Stopping**: the budget, the deadline or the idle timeout ends the run at
  once: the CLI's turn is interrupted (as Esc does: a CLI only signalled while
  it waits for a hook's answer sends one more model request), then the process
  gets SIGTERM (SIGKILL a second later if it lingers) instead of the SDK's
  graceful close, which waits up to 5 s for a CLI busy with a model call; no
  process, hook or tool task is left behind. lyra's
  deadline holds even where the CLI's own ``max_budget_usd`` would hang
  (claude-agent-sdk-python #1273).
- **Endings**: the run is read to its end, as ``query()`` reads it: a turn that
  a background subagent wakes after a result belongs to the run, and the last
  result's answer is the output. A result that is not a clean success
  (``error_max_turns``, ``error_max_budget_usd``, an API error with its HTTP
  status, a hook that stopped the run, ...) becomes the SDK's ``ResultError``
  the moment it arrives,
  classified in :mod:`lyra.delegation._foreign._claude_agent`: running out of
  turns is ``timeout`` / ``budget``, never a success. A ``refusal`` stop is
  ``invalid_task`` at once. Structured output (``output_format``) is returned as
  JSON text. The CLI's own retries are off (``CLAUDE_CODE_MAX_RETRIES=0``,
  unless your ``env`` sets it): lyra's recovery owns retrying.

**The context in tools.** The SDK hands a tool only its arguments, so lyra
puts the run's :class:`~lyra.ChildContext` in a context variable:
:func:`current_context` returns it inside the agent's in-process tools
(``@tool`` + ``create_sdk_mcp_server``) and hooks, so a tool can
``await ctx.delegate(...)`` a grandchild (of any framework) under the same
tree, ``ctx.step(...)`` or ``ctx.block(...)``. ``ctx.block`` ends the run as
declared, before the CLI's next model request, even though the SDK turns the
tool's exception into an error result for the model. Your own state reaches
tools as the SDK intends (a closure or a module-level object); the two coexist.

**Continuation.** The CLI's session id is kept in ``ctx.state`` (JSON, so
durable runs keep it); the next attempt of the same task (``ctx.attempt >
1``) resumes that session, so the model sees the first attempt's messages and
the continuation prompt arrives as the next user turn. The transcript lives
where the CLI keeps it: on local disk under ``CLAUDE_CONFIG_DIR``, or in the
``session_store`` of your options (the SDK's way to resume on another
machine). A session that cannot be found is started afresh.

**Traces.** With a tracer provider, the SDK passes the current span to the
CLI as ``TRACEPARENT``; a CLI with telemetry on (``CLAUDE_CODE_ENABLE_TELEMETRY=1``,
``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1``, ``OTEL_TRACES_EXPORTER=otlp``, ...)
then parents its ``claude_code.interaction`` span under lyra's
``invoke_agent`` span. lyra makes no model-call spans of its own for this
child (the CLI's ``claude_code.llm_request`` spans are those).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING

from lyra.children._framework import (
    check_flags,
    check_prices,
    check_wraps,
    contained,
    framework,
    labelled,
)
from lyra.children._pricing import Price
from lyra.delegation import ChildContext

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions

__all__ = ["EXTRA", "ClaudeAgentChild", "current_context"]

EXTRA = "claude-agent-sdk"
"""The extra that installs the Claude Agent SDK."""

_current: ContextVar[ChildContext | None] = ContextVar("lyra_claude_agent_context", default=None)


def current_context() -> ChildContext:
    """The :class:`~lyra.ChildContext` of the :class:`ClaudeAgentChild` run that
    called this tool or hook. Raises ``RuntimeError`` outside such a run."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_context() is only available inside a ClaudeAgentChild run")
    return ctx


class ClaudeAgentChild:
    """A Claude Agent SDK agent (its ``ClaudeAgentOptions``) as a lyra child.

    ``options`` is used as it is, on a copy that carries the tree's limits
    (see the module docstring); ``None`` means the SDK's defaults. ``prices``
    adds or replaces entries of lyra's price table (USD per million tokens),
    for a model lyra does not know. ``ask_tool=True`` gives the agent an
    in-process tool, ``mcp__lyra__ask_question``, that asks through ``ctx.ask``;
    ``show_limits=True`` appends the time and budget the task has left to the
    system prompt.
    """

    def __init__(
        self,
        options: ClaudeAgentOptions | None = None,
        *,
        prices: Mapping[str, Price] | None = None,
        ask_tool: bool = False,
        show_limits: bool = False,
    ) -> None:
        sdk = framework("claude_agent_sdk", extra=EXTRA, child="ClaudeAgentChild")
        if options is not None:
            what = "a claude_agent_sdk.ClaudeAgentOptions"
            check_wraps(options, sdk.ClaudeAgentOptions, child="ClaudeAgentChild", what=what)
        self.options: ClaudeAgentOptions = (
            options if options is not None else sdk.ClaudeAgentOptions()
        )
        check_prices("ClaudeAgentChild", prices)
        check_flags("ClaudeAgentChild", ask_tool=ask_tool, show_limits=show_limits)
        from lyra.children import _claude_run  # (imported now: nothing inside a deadline)

        self._claude = _claude_run
        self.prices = prices
        self.ask_tool = ask_tool
        self.show_limits = show_limits

    @property
    def name(self) -> str:
        """The child as a report names it (its model)."""
        return labelled("ClaudeAgentChild", self.options.model)

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        """Run the agent on ``prompt`` in a Claude Code CLI process of its own."""
        claude = self._claude
        token = _current.set(ctx)
        try:
            options = self.options
            if self.ask_tool or self.show_limits:
                options = claude.with_lyra(options, ctx, ask=self.ask_tool, limits=self.show_limits)
            return await contained(claude.Run(ctx, options, self.prices).run(prompt))
        finally:
            _current.reset(token)
