"""The framework table of the contract suite (``tests/test_framework_contract.py``).

One :class:`Framework` row per framework child says how to build an agent of
that framework, on the framework's own test model, that plays one scripted
conversation with the same four tools, and how to read back what its model
was sent. The script is framework-neutral: a list of :data:`Turn` values
(:class:`Call` a tool, :class:`Answer`, :class:`Slow`, :class:`Fail` with an
HTTP status), then ``then`` for ever. Each row renders it in its framework's
own terms:

- pydantic-ai: ``FunctionModel`` (a failure is the ``ModelHTTPError`` its models raise);
- OpenAI Agents SDK: a ``Model`` of the SDK's interface (a failure is the ``openai``
  client's status error);
- LangGraph: langchain-core's fake chat model (:mod:`fakes.langchain_models`; a
  failure is the ``anthropic`` SDK's error, as a chat model raises it unwrapped);
- Claude Agent SDK: the real CLI against the local streaming Messages API
  (:mod:`fakes.messages_api`; a failure is that HTTP status);
- Google ADK: a ``BaseLlm`` of ADK's model interface (a failure is
  ``google.genai``'s ``ClientError`` / ``ServerError``).

The tools, in each framework's idiom, reach the attempt's ChildContext through
the framework's own way of handing a tool its context:

- ``lookup(q)``: answers ``found <q>``;
- ``hang()``: never returns (it flags :attr:`Agent.stuck` when it starts);
- ``ask_which()``: declares the attempt blocked (``missing_context``);
- ``consult(question)``: delegates the question to the row's grandchild and
  answers with its output, or ``the helper failed: <category>``.

Adding a framework child adds a row here (and nothing to the contract suite).
"""

import builtins
import contextlib
import importlib
import importlib.util
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from lyra import ChildContext

# -- the script ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """The model asks for one tool call."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    tokens: tuple[int, int] = (100, 10)
    """Input and output tokens the response reports."""
    times: int = 1
    """How many such calls the response asks for at once (run in parallel)."""


@dataclass(frozen=True)
class Answer:
    """The model's final text."""

    text: str
    tokens: tuple[int, int] = (200, 20)
    cut: bool = False
    """The model stopped at its output limit: the text is cut off."""


@dataclass(frozen=True)
class Slow:
    """``turn``, after ``seconds``."""

    seconds: float
    turn: Call | Answer


@dataclass(frozen=True)
class Fail:
    """The model API answers with this HTTP status (429, 400, 500, ...)."""

    status: int


Turn = Call | Answer | Slow | Fail


class Script:
    """The model's side of a conversation: ``turns`` in order, then ``then`` for ever."""

    def __init__(self, *turns: Turn, then: Turn | None = None) -> None:
        self.turns, self.then = list(turns), then

    def __iter__(self) -> Iterator[Turn]:
        yield from self.turns
        while self.then is not None:
            yield self.then

    def first(self, count: int) -> list[Turn]:
        """The first ``count`` turns (a script served up front, as the CLI's is)."""
        return list(itertools.islice(self, count))


BLOCKER = "Which repository is issue 42 in?"
"""What ``ask_which`` declares the attempt blocked on."""

TOOLS = ("lookup", "hang", "ask_which", "consult")


async def consulted(ctx: ChildContext, grandchild: Any, question: str) -> str:
    """The ``consult`` tool's body, the same in every framework."""
    if grandchild is None:
        raise AssertionError("this agent was built without a grandchild")
    found = await ctx.delegate(question, child=grandchild, timeout=5)
    return found.output if found.ok else f"the helper failed: {found.failure.category}"


async def hung(stuck: threading.Event) -> str:
    """The ``hang`` tool's body: flags that it started, then waits for ever."""
    stuck.set()
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


# -- what a row builds --------------------------------------------------------------------


@dataclass
class Agent:
    """An agent built on a script, as a lyra child, and what its model was sent."""

    child: Any
    sent: Callable[[], list[list[str]]]
    """For each model request so far, the tool results it carried (in order)."""
    ref: dict[str, Any] = field(default_factory=dict)
    """JSON options that :func:`rebuild` needs besides the framework and the answer."""
    stuck: threading.Event = field(default_factory=threading.Event)
    """Set when the ``hang`` tool starts."""

    @property
    def requests(self) -> int:
        """How many model requests were made."""
        return len(self.sent())


Make = Callable[..., Agent]
"""``make(script, *, stuck=None, grandchild=None, max_turns=None, model=None, **served)``."""


@contextlib.contextmanager
def _nothing_to_serve(script: Script) -> Iterator[dict[str, Any]]:
    yield {}


@dataclass(frozen=True)
class Framework:
    """One framework child, as the contract suite drives it."""

    name: str
    module: str
    """The framework's top-level import (never imported by importing the child's module)."""
    child_module: str
    extra: str
    make: Make
    own_limit: str
    """How the framework's own turn limit is named in the evidence."""
    exceptions: Callable[[], tuple[set[str], set[str]]]
    """The public exception classes of the installed framework, and those lyra maps."""
    walk_finds: frozenset[str]
    """Exception classes the walk must find (so a walk that reaches nothing fails)."""
    patience: float = 0.3
    """Seconds a run needs to reach its model and tools (the Claude CLI must start)."""
    tool_prefix: str = ""
    """How lyra names the tools in the usage (the CLI's ``mcp__lyra__``)."""
    serve: Callable[[Script], contextlib.AbstractContextManager[dict[str, Any]]] = _nothing_to_serve
    """Runs what the model needs (a local API) while the agent is used; yields what
    ``make`` needs to reach it."""

    def tool(self, name: str) -> str:
        return self.tool_prefix + name

    @contextlib.contextmanager
    def agent(self, script: Script, **options: Any) -> Iterator[Agent]:
        """The agent on ``script``, its model served while the block runs."""
        with self.serve(script) as served:
            yield self.make(script, **options, **served)

    def __str__(self) -> str:
        return self.name


def rebuild(framework: str, answer: str, **ref: Any) -> Any:
    """An importable factory (for ChildRef): a fresh child of ``framework`` whose model
    answers ``answer``."""
    row = next(row for row in FRAMEWORKS if row.name == framework)
    return row.make(Script(Answer(answer)), **ref).child


# -- exception walks ----------------------------------------------------------------------


_CLASS = re.compile(r"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)[ \t]*:", re.MULTILINE)


def exception_classes_in_source(
    package: str, *, under: Sequence[str] = ("",), with_warnings: bool = False
) -> set[str]:
    """Every public exception class (warning classes too, ``with_warnings``) ``package``
    defines in its modules whose paths start with one of ``under``, read from its source
    (its tests aside; no module imported, so modules whose optional dependencies are
    missing count too, and a large framework is read in a fraction of a second): a class
    is one when a base is, or is a built-in exception, or a foreign ``…Error`` /
    ``…Exception`` (``…Warning``)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None, f"{package} is not installed"
    assert spec.submodule_search_locations is not None, f"{package} is no package"
    roots = [Path(folder) for folder in spec.submodule_search_locations]
    paths = [
        path
        for root in roots
        for path in root.rglob("*.py")
        if "tests" not in path.relative_to(root).parts
        and path.relative_to(root).as_posix().startswith(tuple(under))
    ]
    bases: dict[str, set[str]] = {}
    for path in paths:
        for name, listed in _CLASS.findall(path.read_text(encoding="utf-8")):
            named = (part.strip() for part in listed.split(","))
            parents = {re.split(r"[\[\s]", part)[0].rpartition(".")[2] for part in named if part}
            bases.setdefault(name, set()).update(parents - {""})
    found = _descendants(bases, BaseException, ("Error", "Exception", "Warning"))
    if not with_warnings:
        found -= _descendants(bases, Warning, ("Warning",))
    return {name for name in found if not name.startswith("_")}


def _descendants(bases: dict[str, set[str]], root: type, suffixes: tuple[str, ...]) -> set[str]:
    """The classes in ``bases`` (name → base names) below ``root``: a base is one, or is
    a built-in subclass of it, or is a foreign class named with one of ``suffixes``."""
    builtin = {
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, root)
    }

    def foreign(base: str) -> bool:
        return base not in bases and (base in builtin or base.endswith(suffixes))

    found: set[str] = set()
    while grown := {
        name
        for name, parents in bases.items()
        if name not in found and any(p in found or foreign(p) for p in parents)
    }:
        found |= grown
    return found


# -- pydantic-ai ------------------------------------------------------------------------------


def _pydantic_ai(
    script: Script,
    *,
    stuck: threading.Event | None = None,
    grandchild: Any = None,
    max_turns: int | None = None,
    model: str | None = None,
) -> Agent:
    from pydantic_ai import Agent as PAIAgent
    from pydantic_ai import RunContext, UsageLimits
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    from lyra.children.pydantic_ai import PydanticAIChild

    stuck = stuck or threading.Event()
    turns, requests = iter(script), []
    name = model or "scripted"

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(
            [
                str(part.content)
                for message in messages
                for part in message.parts
                if isinstance(part, ToolReturnPart)
            ]
        )
        turn = next(turns)
        if isinstance(turn, Slow):
            await anyio.sleep(turn.seconds)
            turn = turn.turn
        if isinstance(turn, Fail):
            raise ModelHTTPError(turn.status, name, body={"error": "scripted"})
        usage = RequestUsage(input_tokens=turn.tokens[0], output_tokens=turn.tokens[1])
        if isinstance(turn, Call):
            calls = [ToolCallPart(turn.tool, dict(turn.args)) for _ in range(turn.times)]
            return ModelResponse(parts=calls, usage=usage)
        cut = "length" if turn.cut else None
        return ModelResponse(parts=[TextPart(turn.text)], usage=usage, finish_reason=cut)

    agent: PAIAgent[ChildContext, str] = PAIAgent(
        FunctionModel(respond, model_name=name), deps_type=ChildContext
    )

    @agent.tool_plain
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    @agent.tool_plain(name="hang")
    async def hang_tool() -> str:
        """Wait for ever."""
        return await hung(stuck)

    @agent.tool
    def ask_which(ctx: RunContext[ChildContext]) -> str:
        """Ask which issue is meant."""
        ctx.deps.block("missing_context", BLOCKER)

    @agent.tool(name="consult")
    async def consult_tool(ctx: RunContext[ChildContext], question: str) -> str:
        """Ask a helper."""
        return await consulted(ctx.deps, grandchild, question)

    limits = UsageLimits(request_limit=max_turns) if max_turns else None
    return Agent(PydanticAIChild(agent, usage_limits=limits), lambda: requests, stuck=stuck)


def _pydantic_ai_exceptions() -> tuple[set[str], set[str]]:
    from lyra.delegation._foreign._pydantic_ai import PYDANTIC_AI_ERRORS

    return exception_classes_in_source("pydantic_ai", with_warnings=True), set(PYDANTIC_AI_ERRORS)


# -- OpenAI Agents SDK ------------------------------------------------------------------------


def _openai_status_error(status: int) -> BaseException:
    """The error the real ``openai`` client raises for an HTTP ``status``."""
    import httpx2
    import openai

    request = httpx2.Request("POST", "http://127.0.0.1/v1/responses")
    headers = {"retry-after": "7"} if status == 429 else {}
    response = httpx2.Response(status, headers=headers, request=request)
    kinds = {400: openai.BadRequestError, 429: openai.RateLimitError}
    kind = kinds.get(status, openai.InternalServerError)
    return kind(f"HTTP {status}", response=response, body=None)


def _openai_agents(
    script: Script,
    *,
    stuck: threading.Event | None = None,
    grandchild: Any = None,
    max_turns: int | None = None,
    model: str | None = None,
) -> Agent:
    import agents
    from agents import Agent as SDKAgent
    from agents import RunContextWrapper, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from lyra.children.openai_agents import OpenAIAgentsChild

    agents.set_tracing_disabled(True)  # the SDK's own tracing exports to OpenAI's backend
    stuck = stuck or threading.Event()
    turns, requests = iter(script), []
    ids = itertools.count(1)

    class ScriptedModel(Model):
        """The SDK's model interface, answering from the script."""

        def __init__(self, name: str) -> None:
            self.model = name

        async def get_response(
            self, system_instructions: Any, input: Any, *a: Any, **k: Any
        ) -> Any:
            items = input if isinstance(input, list) else []
            requests.append(
                [str(i["output"]) for i in items if i.get("type") == "function_call_output"]
            )
            turn = next(turns)
            if isinstance(turn, Slow):
                await anyio.sleep(turn.seconds)
                turn = turn.turn
            if isinstance(turn, Fail):
                raise _openai_status_error(turn.status)
            output: list[Any]
            if isinstance(turn, Call):
                output = [
                    ResponseFunctionToolCall(
                        id=f"fc_{n}",
                        call_id=f"call_{n}",
                        name=turn.tool,
                        arguments=json.dumps(dict(turn.args)),
                        type="function_call",
                    )
                    for n in itertools.islice(ids, turn.times)
                ]
            else:
                text = ResponseOutputText(text=turn.text, type="output_text", annotations=[])
                message = ResponseOutputMessage(
                    id=f"msg_{next(ids)}",
                    content=[text],
                    role="assistant",
                    status="incomplete" if turn.cut else "completed",
                    type="message",
                )
                output = [message]
            incoming, outgoing = turn.tokens
            usage = Usage(
                requests=1,
                input_tokens=incoming,
                output_tokens=outgoing,
                total_tokens=incoming + outgoing,
            )
            return ModelResponse(output=output, usage=usage, response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError("the contract suite does not stream")

    @function_tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    @function_tool(name_override="hang")
    async def hang_tool() -> str:
        """Wait for ever."""
        return await hung(stuck)

    @function_tool
    def ask_which(wrapper: RunContextWrapper[ChildContext]) -> str:
        """Ask which issue is meant."""
        wrapper.context.block("missing_context", BLOCKER)

    @function_tool(name_override="consult")
    async def consult_tool(wrapper: RunContextWrapper[ChildContext], question: str) -> str:
        """Ask a helper."""
        return await consulted(wrapper.context, grandchild, question)

    agent = SDKAgent(
        name="worker",
        instructions="Do the task.",
        model=ScriptedModel(model or "gpt-test"),
        tools=[lookup, hang_tool, ask_which, consult_tool],
    )
    child = OpenAIAgentsChild(agent, max_turns=max_turns or 10)
    return Agent(child, lambda: requests, stuck=stuck)


def _openai_agents_exceptions() -> tuple[set[str], set[str]]:
    from lyra.delegation._foreign._openai import OPENAI_ERRORS
    from lyra.delegation._foreign._openai_agents import OPENAI_AGENTS_ERRORS

    found = exception_classes_in_source("agents") | exception_classes_in_source(
        "openai", under=("lib", "_exceptions", "_response")
    )
    return found, set(OPENAI_AGENTS_ERRORS) | set(OPENAI_ERRORS)


# -- LangGraph --------------------------------------------------------------------------------


def _anthropic_status_error(status: int) -> BaseException:
    """The error the real ``anthropic`` SDK raises for an HTTP ``status`` (a LangChain chat
    model lets it through unwrapped)."""
    import anthropic
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    headers = {"retry-after": "7"} if status == 429 else {}
    response = httpx2.Response(status, headers=headers, request=request)
    kinds = {
        400: anthropic.BadRequestError,
        401: anthropic.AuthenticationError,
        429: anthropic.RateLimitError,
    }
    kind = kinds.get(status, anthropic.InternalServerError)
    return kind(f"HTTP {status}", response=response, body=None)


def _langgraph(
    script: Script,
    *,
    stuck: threading.Event | None = None,
    grandchild: Any = None,
    max_turns: int | None = None,
    model: str | None = None,
) -> Agent:
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool

    from fakes.langchain_models import ScriptedModel, react_graph, reply
    from lyra.children.langgraph import LangGraphChild, child_context

    stuck = stuck or threading.Event()
    name = model or "claude-sonnet-5"

    def rendered() -> Iterator[Any]:
        for turn in script:
            if isinstance(turn, Slow):
                yield turn.seconds
                turn = turn.turn
            if isinstance(turn, Fail):
                yield _anthropic_status_error(turn.status)
            elif isinstance(turn, Call):
                calls = [(turn.tool, dict(turn.args))] * turn.times
                yield reply("", *calls, tokens=turn.tokens, model=name)
            else:
                answer = reply(turn.text, tokens=turn.tokens, model=name)
                if turn.cut:
                    answer.response_metadata["stop_reason"] = "max_tokens"
                yield answer

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    @tool("hang")
    async def hang_tool() -> str:
        """Wait for ever."""
        return await hung(stuck)

    @tool
    async def ask_which(config: RunnableConfig) -> str:
        """Ask which issue is meant."""
        child_context(config).block("missing_context", BLOCKER)

    @tool("consult")
    async def consult_tool(question: str, config: RunnableConfig) -> str:
        """Ask a helper."""
        return await consulted(child_context(config), grandchild, question)

    chat = ScriptedModel.of(rendered(), model=name)
    graph = react_graph(chat, [lookup, hang_tool, ask_which, consult_tool])
    limit = 2 * max_turns if max_turns else None  # a model step and a tool step a turn

    def sent() -> list[list[str]]:
        return [
            [str(m.content) for m in request if isinstance(m, ToolMessage)]
            for request in chat.requests
        ]

    return Agent(LangGraphChild(graph, recursion_limit=limit), sent, stuck=stuck)


def _langgraph_exceptions() -> tuple[set[str], set[str]]:
    from lyra.delegation._foreign._langgraph import LANGGRAPH_ERRORS

    found = exception_classes_in_source("langgraph") | exception_classes_in_source("langchain_core")
    return found, set(LANGGRAPH_ERRORS)


# -- Claude Agent SDK ---------------------------------------------------------------------


CLAUDE_MODEL = "claude-sonnet-4-6"  # lyra's price table: $3 / $15 per million tokens


def cli_env(api_url: str, home: str) -> dict[str, str]:
    """The Claude Code CLI's environment: the fake API, a throwaway home, nothing else
    reachable (the conftest's network guard covers this process, not the CLI's)."""
    return {
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HOME": home,
        "CLAUDE_CONFIG_DIR": str(Path(home) / ".claude"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def child_processes() -> set[int]:
    """Processes whose parent is this one (zombies included: an unreaped CLI is a leak)."""
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(entry.name))
    return found


_CLI_TRIES_A_400 = 6
"""The CLI sends a request the API refused with a 400 five more times before it gives up
(a 429 with a long retry-after, or a 5xx, it reports at once)."""


def _claude_replies(turn: Turn) -> list[Any]:
    """What the local Messages API answers the CLI for one turn."""
    from fakes.messages_api import error, message, rate_limited, slow, tool_use

    if isinstance(turn, Slow):
        return [slow(reply, turn.seconds) for reply in _claude_replies(turn.turn)]
    if isinstance(turn, Fail):
        if turn.status == 429:
            return [rate_limited(7)]
        kind = "invalid_request_error" if turn.status < 500 else "api_error"
        tries = _CLI_TRIES_A_400 if turn.status == 400 else 1
        return [error(turn.status, kind, f"HTTP {turn.status}")] * tries
    usage = {"input_tokens": turn.tokens[0], "output_tokens": turn.tokens[1]}
    if isinstance(turn, Call):
        calls = [tool_use(f"mcp__lyra__{turn.tool}", dict(turn.args)) for _ in range(turn.times)]
        return [message(calls, "tool_use", model=CLAUDE_MODEL, usage=usage)]
    stop = "max_tokens" if turn.cut else "end_turn"
    return [message(turn.text, stop, model=CLAUDE_MODEL, usage=usage)]


@contextlib.contextmanager
def _claude_api(script: Script) -> Iterator[dict[str, Any]]:
    """The local streaming Messages API serving the script, and a throwaway home."""
    from fakes.messages_api import MessagesAPI

    turns = script.first(len(script.turns) + (12 if script.then is not None else 0))
    replies = [reply for turn in turns for reply in _claude_replies(turn)]
    home = tempfile.mkdtemp(prefix="lyra-claude-")
    try:
        with MessagesAPI(replies, streaming=True, strict=False) as api:
            yield {"api_url": api.url, "home": home, "server": api}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _claude_agent(
    script: Script,
    *,
    api_url: str,
    home: str,
    server: Any = None,
    stuck: threading.Event | None = None,
    grandchild: Any = None,
    max_turns: int | None = None,
    model: str | None = None,
) -> Agent:
    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool

    from lyra.children.claude_agent import ClaudeAgentChild, current_context

    stuck = stuck or threading.Event()

    def text(value: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": value}]}

    @tool("lookup", "Look something up", {"q": str})
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        return text(f"found {args['q']}")

    @tool("hang", "Wait for ever", {})
    async def hang_tool(args: dict[str, Any]) -> dict[str, Any]:
        return text(await hung(stuck))

    @tool("ask_which", "Ask which issue is meant", {})
    async def ask_which(args: dict[str, Any]) -> dict[str, Any]:
        current_context().block("missing_context", BLOCKER)

    @tool("consult", "Ask a helper", {"question": str})
    async def consult_tool(args: dict[str, Any]) -> dict[str, Any]:
        return text(await consulted(current_context(), grandchild, args["question"]))

    tools = [lookup, hang_tool, ask_which, consult_tool]
    options = ClaudeAgentOptions(
        model=model or CLAUDE_MODEL,
        cwd=home,
        env=cli_env(api_url, home),
        mcp_servers={"lyra": create_sdk_mcp_server("lyra", tools=tools)},
        allowed_tools=[f"mcp__lyra__{name}" for name in TOOLS],
        max_turns=max_turns,
    )

    def sent() -> list[list[str]]:
        found = []
        for request in server.requests if server is not None else ():
            results = []
            for turn in request["messages"]:
                content = turn["content"]
                for block in content if isinstance(content, list) else ():
                    if block.get("type") == "tool_result":
                        inner = block.get("content")
                        parts = inner if isinstance(inner, list) else [{"text": inner}]
                        said = "".join(str(p.get("text", "")) for p in parts)
                        results.append(said.split("\n<system-reminder>")[0])  # the CLI's note
            found.append(results)
        return found

    ref = {"api_url": api_url, "home": home}
    return Agent(ClaudeAgentChild(options), sent, ref=ref, stuck=stuck)


def _claude_agent_exceptions() -> tuple[set[str], set[str]]:
    from lyra.delegation._foreign._claude_agent import CLAUDE_AGENT_ERRORS

    found = exception_classes_in_source("claude_agent_sdk", with_warnings=True)
    return found, set(CLAUDE_AGENT_ERRORS)


# -- Google ADK -----------------------------------------------------------------------------


def _google_adk(
    script: Script,
    *,
    stuck: threading.Event | None = None,
    grandchild: Any = None,
    max_turns: int | None = None,
    model: str | None = None,
) -> Agent:
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig
    from google.genai import types

    from fakes.adk_models import ScriptedLlm, http_error, reply, tool_results
    from lyra.children.google_adk import GoogleADKChild, current_context

    stuck = stuck or threading.Event()

    def rendered() -> Iterator[Any]:
        for turn in script:
            if isinstance(turn, Slow):
                yield turn.seconds
                turn = turn.turn
            if isinstance(turn, Fail):
                yield http_error(turn.status, retry_after="7s" if turn.status == 429 else None)
            elif isinstance(turn, Call):
                yield reply("", *[(turn.tool, dict(turn.args))] * turn.times, tokens=turn.tokens)
            else:
                cut = types.FinishReason.MAX_TOKENS if turn.cut else None
                yield reply(turn.text, tokens=turn.tokens, finish_reason=cut)

    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    async def hang() -> str:
        """Wait for ever."""
        return await hung(stuck)

    def ask_which() -> str:
        """Ask which issue is meant."""
        current_context().block("missing_context", BLOCKER)

    async def consult(question: str) -> str:
        """Ask a helper."""
        return await consulted(current_context(), grandchild, question)

    agent = LlmAgent(
        name="worker",
        model=(llm := ScriptedLlm.of(rendered(), model=model or "scripted")),
        instruction="Do the task.",
        tools=[lookup, hang, ask_which, consult],
    )
    limit = RunConfig(max_llm_calls=max_turns) if max_turns else None
    child = GoogleADKChild(agent, run_config=limit)
    return Agent(child, lambda: [tool_results(r) for r in llm.requests], stuck=stuck)


def _google_adk_exceptions() -> tuple[set[str], set[str]]:
    from lyra.delegation._foreign._google_adk import GOOGLE_ADK_ERRORS

    found = exception_classes_in_source("google.adk", with_warnings=True)
    found |= exception_classes_in_source("google.genai", with_warnings=True)
    return found, set(GOOGLE_ADK_ERRORS)


# -- the table --------------------------------------------------------------------------------


FRAMEWORKS: tuple[Framework, ...] = (
    Framework(
        "pydantic-ai",
        module="pydantic_ai",
        child_module="lyra.children.pydantic_ai",
        extra="pydantic-ai",
        make=_pydantic_ai,
        own_limit="UsageLimitExceeded",
        exceptions=_pydantic_ai_exceptions,
        walk_finds=frozenset(
            {
                "UsageLimitExceeded",
                "HookTimeoutError",
                "WorkspaceError",
                "MCPError",
                "FallbackExceptionGroup",
            }
        ),
    ),
    Framework(
        "openai-agents",
        module="agents",
        child_module="lyra.children.openai_agents",
        extra="openai-agents",
        make=_openai_agents,
        own_limit="MaxTurnsExceeded",
        exceptions=_openai_agents_exceptions,
        walk_finds=frozenset({"MaxTurnsExceeded", "ExecTimeoutError", "RateLimitError"}),
    ),
    Framework(
        "langgraph",
        module="langgraph",
        child_module="lyra.children.langgraph",
        extra="langgraph",
        make=_langgraph,
        own_limit="GraphRecursionError",
        exceptions=_langgraph_exceptions,
        walk_finds=frozenset({"GraphRecursionError", "ToolInvocationError", "ToolException"}),
    ),
    Framework(
        "claude-agent-sdk",
        module="claude_agent_sdk",
        child_module="lyra.children.claude_agent",
        extra="claude-agent-sdk",
        make=_claude_agent,
        own_limit="error_max_turns",
        exceptions=_claude_agent_exceptions,
        walk_finds=frozenset({"ResultError", "ProcessError", "CLINotFoundError"}),
        patience=2.5,  # (a CLI process: 1.5 s was too little on a loaded host)
        tool_prefix="mcp__lyra__",
        serve=_claude_api,
    ),
    Framework(
        "google-adk",
        module="google.adk",
        child_module="lyra.children.google_adk",
        extra="google-adk",
        make=_google_adk,
        own_limit="LlmCallsLimitExceededError",
        exceptions=_google_adk_exceptions,
        walk_finds=frozenset({"LlmCallsLimitExceededError", "ClientError", "ToolExecutionError"}),
        patience=0.6,  # (its runner, session and plugins: 0.3 s was too little on a loaded host)
    ),
)
"""Every framework child lyra has, as the contract suite drives it."""
