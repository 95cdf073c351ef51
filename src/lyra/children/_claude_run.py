"""One run of a Claude Agent SDK agent under a lyra ChildContext (see
:mod:`lyra.children.claude_agent`, which imports this module when a run starts:
it imports the framework).

A :class:`Run` folds the tree's limits into a copy of the options, answers the
CLI's hooks where the CLI must wait for lyra (a turn charged ahead of each model
request), reads the CLI's messages (heartbeats, usage per response, tool calls
and results as progress, the session id, the result) and stops the CLI process
at once when the run ends early.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing, suppress
from typing import Any, cast

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    CLIConnectionError,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    Message,
    ProcessError,
    ResultError,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    tool,
)

from lyra.children._framework import (
    ASK_DESCRIPTION,
    ASK_TOOL,
    limits_text,
    output_text,
    tool_done,
)
from lyra.children._meter import Meter, Tokens, count
from lyra.children._pricing import Price, PriceList
from lyra.delegation import ChildContext
from lyra.errors import ChildSignal, ConfigurationError, TaskRejected

STATE_KEY = "claude_agent"
"""Where the run keeps its session in ``ctx.state``: ``{"session_id": ...}``."""
STOP_GRACE = 1.0
"""Seconds a CLI process gets to exit after SIGTERM before SIGKILL."""
INTERRUPT_GRACE = 0.5
"""Seconds a CLI gets to acknowledge an interrupt before it is signalled."""
_ANSWER_TOOL = "StructuredOutput"
"""The CLI's tool for ``output_format``'s answer; the run ends when it succeeds."""
_SYNTHETIC = "<synthetic>"
"""The model name of a message the CLI makes up (an API error's text)."""


@dataclasses.dataclass(slots=True)
class _Response:
    """A model response being streamed: its model and the output tokens charged."""

    model: str
    output: int = 0


class Run:
    """One run of ``options`` under ``ctx``."""

    def __init__(
        self,
        ctx: ChildContext,
        options: ClaudeAgentOptions,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.ctx = ctx
        self.base = options
        self._meter = Meter(ctx, PriceList(prices), child="ClaudeAgentChild")
        self._refusal: Exception | None = None  # why a hook stopped the CLI, to raise
        self._ahead = 0  # turns charged ahead that no response has used yet
        self._responses: dict[str, _Response] = {}  # the responses charged, by id
        self._open: dict[str | None, _Response] = {}  # streamed response per thread
        self._tools: dict[str, str] = {}  # tool calls under way: name by tool_use id
        self._result: ResultMessage | None = None
        self._heard = False
        self._halted = False  # a hook told the CLI to stop: it ends by itself

    async def run(self, prompt: str) -> str:
        """The agent's output for ``prompt``; raises as the run failed."""
        resume = self._resumable()
        try:
            return await self._session(prompt, resume)
        except ResultError:
            if resume is None or self._heard:
                raise
        # The CLI found no such session (its transcript is not where this CLI
        # looks): start afresh; the continuation prompt says what was done.
        return await self._session(prompt, None)

    async def _session(self, prompt: str, resume: str | None) -> str:
        """One CLI process, read until the CLI ends the run (as ``query()`` does: a
        turn that background agents wake up after a result belongs to the run)."""
        client = ClaudeSDKClient(self._options(resume))
        try:
            await client.connect(_single(prompt))
            _answer_quietly(client)
            replies = cast("AsyncGenerator[Message, None]", client.receive_messages())
            async with aclosing(replies) as messages:
                async for message in messages:
                    self._read(message)
        except BaseException:
            await _stop(client, halted=self._halted)
            raise
        finally:
            await client.disconnect()
        return self._output()

    # -- the options of this run ----------------------------------------------------

    def _resumable(self) -> str | None:
        """The session of an earlier attempt of this task, to resume."""
        base = self.base
        if self.ctx.attempt <= 1 or base.resume is not None or base.continue_conversation:
            return None
        if self.ctx.fresh:  # the transcript outgrew the context window: start afresh
            return None
        session = self.ctx.state.get(STATE_KEY, {}).get("session_id")
        return session if isinstance(session, str) else None

    def _options(self, resume: str | None) -> ClaudeAgentOptions:
        """A copy of the options with the tree's limits and lyra's hooks."""
        base, left = self.base, self.ctx.budget_left
        env = {"CLAUDE_CODE_MAX_RETRIES": "0", **base.env}
        if left.max_tokens is not None:
            own = _integer(env.get("CLAUDE_CODE_MAX_OUTPUT_TOKENS"))
            env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(_least(own, max(1, left.max_tokens)))
        changes: dict[str, Any] = {
            "env": env,
            "hooks": self._hooks(),
            "max_turns": _least(base.max_turns, left.max_turns),
            "max_budget_usd": _least(base.max_budget_usd, left.max_cost_usd),
            "include_partial_messages": True,  # each response's usage as it streams
            "forward_subagent_text": True,  # every subagent response, to charge it
        }
        if resume is not None:
            changes["resume"] = resume
        return dataclasses.replace(base, **changes)

    def _hooks(self) -> Any:
        """The options' hooks with lyra's first (a dict the SDK's types do not cover:
        ``PostToolBatch`` is a CLI hook the SDK passes through untyped)."""
        hooks: dict[str, list[HookMatcher]] = {
            str(event): list(matchers) for event, matchers in (self.base.hooks or {}).items()
        }
        ours = {
            "UserPromptSubmit": self._turn,
            "PostToolBatch": self._batch_done,
            "SubagentStart": self._turn,
        }
        for event, callback in ours.items():
            hooks.setdefault(event, []).insert(0, HookMatcher(hooks=[callback]))
        return hooks

    # -- hooks: the CLI waits for their answer ----------------------------------------

    async def _turn(
        self, data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """A model request is about to be made: its turn is charged ahead (and a cost
        budget needs a price for the model the options name)."""
        model = self.base.model
        try:
            await self._meter.before_request(model, provider="anthropic", known=model is not None)
        except (ChildSignal, ConfigurationError) as exc:  # the request is never sent
            self._refusal = exc
            return self._halt(str(exc))
        self._ahead += 1
        return self._go_on()

    async def _batch_done(
        self, data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """A batch of tool calls ended: the next request's turn is charged ahead, unless
        the batch gave the run's structured answer (the CLI then ends, asking nothing)."""
        calls = cast("Mapping[str, Any]", data).get("tool_calls") or []
        if any(isinstance(c, dict) and c.get("tool_name") == _ANSWER_TOOL for c in calls):
            return self._go_on()
        return await self._turn(data, tool_use_id, context)

    def _go_on(self) -> HookJSONOutput:
        """Let the CLI go on, unless a tool declared the child blocked: then the CLI
        stops by itself before its next model request and reports the stop."""
        blocked = self.ctx.blocked
        return {} if blocked is None else self._halt(f"blocked: {blocked.reason}")

    def _halt(self, reason: str) -> HookJSONOutput:
        """A hook answer that stops the CLI before anything more happens."""
        self._halted = True
        return {"continue_": False, "stopReason": f"lyra: {reason}"}

    # -- messages --------------------------------------------------------------------

    def _read(self, message: Message) -> None:
        """One message from the CLI: a heartbeat, and what it says."""
        self._heard = True
        self.ctx.heartbeat()
        if isinstance(message, StreamEvent):
            self._event(message.event, message.parent_tool_use_id)
        elif isinstance(message, AssistantMessage):
            if message.message_id is not None and message.model != _SYNTHETIC:
                self._arrived(message.message_id, message.model, message.usage or {})
            self._calls(message)
        elif isinstance(message, UserMessage):
            self._results(message)
        elif isinstance(message, ResultMessage):
            self._result = message
            self._raise_if_stopped()
            _raise_if_failed(message)  # at once: no later turn makes it a success
        elif isinstance(message, SystemMessage) and message.subtype == "init":
            session = message.data.get("session_id")
            if isinstance(session, str):
                self.ctx.state.setdefault(STATE_KEY, {})["session_id"] = session

    def _calls(self, message: AssistantMessage) -> None:
        """Tool calls the model made (the main agent's or a subagent's): each one starts
        now, as progress (the CLI runs them as this message arrives)."""
        for block in message.content:
            if isinstance(block, ToolUseBlock) and block.name != _ANSWER_TOOL:
                self._tools[block.id] = block.name
                self.ctx.tool_started(block.name, block.input)

    def _results(self, message: UserMessage) -> None:
        """Tool results: a call ended, a success as a completed step."""
        if isinstance(message.content, str):
            return
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.tool_use_id in self._tools:
                name = self._tools.pop(block.tool_use_id)
                error = None
                if block.is_error:
                    error = RuntimeError(f"{name} failed: {_text(block.content)}")
                tool_done(self.ctx, name, error)

    def _event(self, event: Mapping[str, Any], thread: str | None) -> None:
        """A raw stream event of the Messages API."""
        kind = event.get("type")
        if kind == "message_start":
            body = event.get("message") or {}
            model = str(body.get("model", ""))
            self._open[thread] = self._arrived(str(body.get("id")), model, body.get("usage") or {})
        elif kind == "message_delta":
            response = self._open.get(thread)
            output = (event.get("usage") or {}).get("output_tokens")
            if response is not None and isinstance(output, int) and output > response.output:
                more, response.output = output - response.output, output
                self._meter.add(Tokens(output=more), response.model)
            if (event.get("delta") or {}).get("stop_reason") == "refusal":
                raise TaskRejected("The model refused the task")

    def _arrived(self, response_id: str, model: str, usage: Mapping[str, Any]) -> _Response:
        """The first frame of a model response: its turn (unless charged ahead), its
        input tokens and the output tokens counted so far, charged once."""
        known = self._responses.get(response_id)
        if known is not None:
            return known
        response = self._responses[response_id] = _Response(model, _tokens(usage, "output_tokens"))
        if self._ahead:  # a hook charged this response's turn before its request
            self._ahead -= 1
        else:
            self.ctx.charge(turns=1)
        written = _tokens(usage, "cache_creation_input_tokens")
        read = _tokens(usage, "cache_read_input_tokens")
        fresh = _tokens(usage, "input_tokens")
        self._meter.answer(
            None, Tokens(fresh + written + read, response.output, read, written), model
        )
        return response

    def _raise_if_stopped(self) -> None:
        """A blocker a tool declared, or a refusal that made a hook stop the CLI, ends
        the run as itself (not as the CLI's stopped result)."""
        if self.ctx.blocked is not None:
            raise self.ctx.blocked
        if self._refusal is not None:
            raise self._refusal

    def _output(self) -> str:
        """The result as the child's output, or the SDK's ResultError."""
        self._raise_if_stopped()
        result = self._result
        if result is None:
            raise ProcessError("Claude Code ended without a result")
        _raise_if_failed(result)
        if result.structured_output is not None:
            return output_text(result.structured_output)
        return result.result or ""


def with_lyra(
    options: ClaudeAgentOptions, ctx: ChildContext, *, ask: bool, limits: bool
) -> ClaudeAgentOptions:
    """A copy of ``options`` with lyra's question tool (an in-process MCP server,
    ``lyra``) and the limits appended to the system prompt, as asked."""
    changes: dict[str, Any] = {}
    if ask:

        @tool(ASK_TOOL, ASK_DESCRIPTION, {"question": str})
        async def ask_question(args: dict[str, Any]) -> dict[str, Any]:
            answer = await ctx.ask(str(args.get("question", "")))
            return {"content": [{"type": "text", "text": answer}]}

        server = create_sdk_mcp_server("lyra", tools=[ask_question])
        servers = options.mcp_servers if isinstance(options.mcp_servers, dict) else {}
        changes["mcp_servers"] = {**servers, "lyra": server}
        changes["allowed_tools"] = [*options.allowed_tools, f"mcp__lyra__{ASK_TOOL}"]
    if limits:
        told = limits_text(ctx)
        prompt = options.system_prompt
        if isinstance(prompt, str):
            changes["system_prompt"] = f"{prompt}\n\n{told}"
        elif isinstance(prompt, dict):
            appended = prompt.get("append")
            changes["system_prompt"] = {
                **prompt,
                "append": f"{appended}\n\n{told}" if appended else told,
            }
        else:
            changes["system_prompt"] = {"type": "preset", "preset": "claude_code", "append": told}
    return dataclasses.replace(options, **changes)


async def _stop(client: ClaudeSDKClient, *, halted: bool = False) -> None:
    """End the CLI process now: the turn interrupted, SIGTERM, SIGKILL.

    A CLI that a hook told to stop (``halted``) gets :data:`STOP_GRACE` to end by
    itself. One still running is first interrupted through the control protocol
    (the SDK's ``interrupt()``, the CLI's Esc; it answers in milliseconds, and gets
    :data:`INTERRUPT_GRACE` at most): a CLI only signalled while it waits for a
    hook's answer takes the lost answer for a yes and sends one more request.
    Then SIGTERM, and SIGKILL after :data:`STOP_GRACE`: the SDK's own close waits
    up to 5 s for a CLI busy with a model call. The SDK's reader is cancelled
    before the signal, as its own close does, so that the exit is not logged as a
    crash. (The SDK has no public handle on its process: the attributes are read
    defensively; without them the SDK's close still ends it.)
    """
    process = getattr(getattr(client, "_transport", None), "_process", None)
    if process is None or process.returncode is not None:
        return
    with anyio.CancelScope(shield=True):
        if halted:
            with anyio.move_on_after(STOP_GRACE):
                await process.wait()
        reader = getattr(getattr(client, "_query", None), "_read_task", None)
        if process.returncode is None and reader is not None and not reader.done():
            with anyio.move_on_after(INTERRUPT_GRACE), suppress(Exception):
                await client.interrupt()  # its answer needs the reader
        if process.returncode is not None:
            return
        if reader is not None:
            reader.cancel()
        with suppress(ProcessLookupError):
            process.terminate()
        with anyio.move_on_after(STOP_GRACE):
            await process.wait()
        if process.returncode is None:
            with suppress(ProcessLookupError):
                process.kill()
            with anyio.move_on_after(STOP_GRACE):
                await process.wait()  # reaped here: a killed CLI is no zombie of ours


def _answer_quietly(client: ClaudeSDKClient) -> None:
    """Make the SDK drop an answer to the CLI that comes too late to be written.

    The SDK answers each control request (a hook, an in-process tool's message)
    in a detached task; one that finishes after the CLI's input closed (after an
    interrupt, or the run's end) fails to write and raises where nobody awaits
    it: asyncio logs it as never retrieved, anyio's test runner fails the test.
    The CLI no longer reads those answers, so they are dropped.
    """
    query = getattr(client, "_query", None)
    handle = getattr(query, "_handle_control_request", None)
    if handle is None:
        return

    async def answer(request: Any) -> None:
        with suppress(CLIConnectionError):
            await handle(request)

    query._handle_control_request = answer  # type: ignore[union-attr]


async def _single(prompt: str) -> AsyncIterator[dict[str, Any]]:
    """The prompt as the one user message of a streamed input: the SDK closes the
    CLI's input once the run is over, and the CLI then ends."""
    yield {
        "type": "user",
        "session_id": "",
        "message": {"role": "user", "content": prompt},
        "parent_tool_use_id": None,
    }


def _raise_if_failed(result: ResultMessage) -> None:
    """The SDK's ResultError for a result that is not a clean success."""
    reason = result.terminal_reason
    if result.is_error or result.subtype != "success" or reason not in (None, "completed"):
        raise ResultError(
            f"Claude Code returned an error result: {_why(result)}", data=_data(result)
        )


def _text(content: str | list[dict[str, Any]] | None) -> str:
    """A tool result's text."""
    if content is None or isinstance(content, str):
        return content or ""
    return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))


def _tokens(usage: Mapping[str, Any], name: str) -> int:
    return count(usage.get(name))


def _least(own: Any, left: Any) -> Any:
    """The smaller of a limit of the options and what the tree has left."""
    return left if own is None else own if left is None else min(own, left)


def _integer(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _why(result: ResultMessage) -> str:
    errors = [e for e in result.errors or [] if isinstance(e, str) and e.strip()]
    if errors:
        return "; ".join(errors)
    if result.result and result.result.strip():
        return str(result.result).strip()
    return str(result.terminal_reason or result.subtype)


def _data(result: ResultMessage) -> dict[str, Any]:
    """The result's fields as the SDK's ResultError reads them."""
    return {
        "subtype": result.subtype,
        "is_error": result.is_error,
        "errors": result.errors or [],
        "result": result.result,
        "api_error_status": result.api_error_status,
        "terminal_reason": result.terminal_reason,
        "session_id": result.session_id,
    }
