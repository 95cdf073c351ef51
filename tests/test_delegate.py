"""delegate_task / Supervisor.delegate: the contract around one child attempt."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

import lyra
from lyra import (
    Budget,
    ChildContext,
    DelegationResult,
    Supervisor,
    Task,
    adelegate_task,
    delegate_task,
    parse_report,
)
from lyra.errors import BudgetExhausted, ConfigurationError

pytestmark = pytest.mark.anyio


async def echo(prompt: str, ctx: ChildContext) -> str:
    ctx.step("echoed")
    return prompt.upper()


class EchoAgent:
    """A child written as an object with async run()."""

    async def run(self, prompt: str, ctx: ChildContext) -> str:
        return f"agent: {prompt}"


def test_sync_success_report_ends_in_metadata() -> None:
    """delegate_task returns the output followed by a completed metadata block."""
    report = delegate_task("hello", child=echo, timeout=5)
    assert report.startswith("HELLO\n\n<task_metadata>")
    assert report.endswith("</task_metadata>")
    parsed = parse_report(report)
    assert (parsed.status, parsed.output, parsed.attempt) == ("completed", "HELLO", 1)


async def test_supervisor_returns_a_typed_result() -> None:
    """Supervisor().delegate gives a DelegationResult with output, session and report."""
    result = await Supervisor(EchoAgent()).delegate(
        "hi", timeout=5, session_id="child-fixed", subject="P04637"
    )
    assert isinstance(result, DelegationResult)
    assert (result.status, result.output, result.failure, result.session_id) == (
        "completed",
        "agent: hi",
        None,
        "child-fixed",
    )
    assert parse_report(result.report).subject == "P04637"


async def test_events_are_a_contract() -> None:
    """A failed delegation emits exactly the documented started and failed events."""

    async def blocked(prompt: str, ctx: ChildContext) -> str:
        ctx.block("missing_context", "Which file?")

    with capture_logs() as events:
        await Supervisor(blocked).delegate(
            "fix it", timeout=5, session_id="child-1", subject="S", attempt=2
        )
    assert events[0] == {
        "event": "delegation_started",
        "log_level": "info",
        "session_id": "child-1",
        "subject": "S",
        "attempt": 2,
        "timeout": 5.0,
    }
    failed = dict(events[1])
    assert isinstance(failed.pop("duration"), float)
    assert failed == {
        "event": "delegation_failed",
        "log_level": "info",
        "session_id": "child-1",
        "subject": "S",
        "attempt": 2,
        "category": "missing_context",
        "retryable": False,
        "error_type": "data",
        "blocked_on": "Which file?",
        "evidence": "rule 2: the child declared itself blocked (missing_context)",
    }


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_interrupts_propagate_at_once(interrupt: type[BaseException]) -> None:
    """KeyboardInterrupt and SystemExit raised in a child are never turned into reports."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        raise interrupt()

    with pytest.raises(interrupt):
        delegate_task("task", child=child, timeout=5)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_run_ends_the_event_loop_even_when_caught_inside(
    interrupt: type[BaseException],
) -> None:
    """Out of Supervisor.run an interrupt comes inside its exception group, and asyncio
    re-raises it out of asyncio.run as well: catching it around the run cannot stop it
    (as the README says); the siblings that finished first were delivered."""
    delivered: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        if prompt == "interrupt":
            await anyio.sleep(0.05)
            raise interrupt()
        return prompt

    async def main() -> None:
        tasks = [Task(prompt="done"), Task(prompt="interrupt")]
        try:
            await Supervisor(child, timeout=5).run(
                tasks, on_outcome=lambda o: delivered.append(o.result.output or "")
            )
        except* interrupt:
            delivered.append("caught inside")

    with pytest.raises(interrupt):
        asyncio.run(main())
    assert delivered == ["done", "caught inside"]


async def test_cancelling_the_caller_cancels_the_child() -> None:
    """Cancellation from outside propagates through the delegation; nothing is reported."""
    reached_end = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        await anyio.sleep(10)
        reached_end.append(True)
        return "late"

    with anyio.move_on_after(0.1) as scope:
        await Supervisor(child).delegate("task", timeout=60)
    assert scope.cancelled_caught
    assert reached_end == []


async def _swallows(prompt: str, ctx: ChildContext) -> str:
    """A child that catches its cancellation and returns anyway (in a tool, too)."""

    async def waits() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "caught"
        return "slept"

    ctx.step("started")
    if prompt == "tool":
        return await ctx.tool("wait", waits)
    return await waits()


@pytest.mark.parametrize("prompt", ["plain", "tool"])
async def test_a_cancel_scope_catches_its_cancellation_though_the_child_caught_it(
    prompt: str,
) -> None:
    """A child that catches the CancelledError of a cancel scope around its caller
    (move_on_after, fail_after) and returns does not turn it into a success: the scope
    catches its cancellation, as if the child had let it through. (It got a completed
    report, and the scope caught nothing.)"""
    with anyio.move_on_after(0.1) as scope:
        await Supervisor(_swallows).delegate(prompt, timeout=30)
    assert scope.cancelled_caught
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.1):
            await adelegate_task(prompt, child=_swallows, timeout=30)
    # lyra's own deadline is the child's to meet: it stops it, and reports what it had
    report = parse_report(await adelegate_task(prompt, child=_swallows, timeout=0.1))
    assert (report.status, report.category) == ("failed", "timeout")


async def test_a_cancellation_the_child_made_and_caught_costs_nothing() -> None:
    """A bare task.cancel() the child caught cannot be told from one the child made of
    its own task (a watchdog; async-timeout 4's timeouts never take theirs back): its
    result stands, and nothing is raised to a caller nobody cancelled."""

    async def watchdog(prompt: str, ctx: ChildContext) -> str:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_later(0.05, task.cancel)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "answered from cache"
        return "slept"

    report = parse_report(await adelegate_task("x", child=watchdog, timeout=30))
    assert (report.status, report.output) == ("completed", "answered from cache")


async def _remakes_its_cancellation(prompt: str, ctx: ChildContext) -> str:
    """A child that meets the attempt's cancellation and raises a CancelledError of its
    own making, chained to nothing (as ``asyncio.gather`` does when the awaitable that
    ends last ended otherwise): anyio's scope cannot tell it for its own."""
    if prompt == "spend":
        with contextlib.suppress(BudgetExhausted):  # (the attempt's scope is cancelled)
            ctx.charge(output_tokens=600)
    cancelled = False
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        cancelled = True
        if prompt == "linger":  # (while the caller cancels too)
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.2)
    if cancelled:
        raise asyncio.CancelledError()
    return "slept"


@pytest.mark.parametrize(("prompt", "error_type"), [("wait", "timeout"), ("spend", "budget")])
async def test_lyras_own_cancellation_made_anew_by_the_child_still_ends_it_by_its_limit(
    prompt: str, error_type: str
) -> None:
    """The attempt ends by its deadline or its budget and reports it; the caller,
    whom nobody cancelled, is not cancelled. (The CancelledError went out of
    adelegate_task, with nothing pending on the caller's task.)"""
    budget = Budget(max_tokens=500)
    text = await adelegate_task(prompt, child=_remakes_its_cancellation, timeout=0.2, budget=budget)
    report = parse_report(text)
    assert (report.status, report.category, report.error_type) == ("failed", "timeout", error_type)
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_a_callers_cancellation_still_passes_a_cancellation_made_anew() -> None:
    """The same child, with the caller cancelling too while it lingers: the caller's
    cancellation passes through."""
    call = asyncio.ensure_future(
        adelegate_task("linger", child=_remakes_its_cancellation, timeout=0.05)
    )
    await asyncio.sleep(0.15)  # lyra's deadline has passed; the child lingers
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_blocking_form_refuses_to_run_inside_an_event_loop() -> None:
    """Calling delegate_task from async code is a clear error pointing to the async form."""
    with pytest.raises(RuntimeError, match="adelegate_task"):
        delegate_task("task", child=echo, timeout=5)


def test_an_argument_the_blocking_form_does_not_take_is_refused_in_its_name() -> None:
    """'delegate_task(timout=5) gives "adelegate_task() got an unexpected keyword argument
    'timout'"', raised from inside an event loop: refused at the call, in its own name."""
    from lyra import delegate_with_retry

    with pytest.raises(
        TypeError, match=r"^delegate_task\(\): got an unexpected keyword argument 'timout'"
    ):
        delegate_task("task", child=echo, timout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^delegate_with_retry\(\): missing a required argument"):
        delegate_with_retry()  # type: ignore[call-arg]


def test_caller_mistakes_the_api_trial_found_are_said_at_the_call() -> None:
    """'recover(limits={"timeout": 5}) raises AttributeError from deep inside;
    Supervisor(child, executor=42) is accepted and .run() raises AttributeError; a timeout
    of 10**400 raises an OverflowError that names no parameter'."""
    from lyra.recovery import recover

    with pytest.raises(TypeError, match=r"limits= must be a lyra.Limits, e.g. Limits\(timeout="):
        anyio.run(lambda: recover("x", child=echo, limits={"timeout": 5}))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"executor= must be an Executor .*, not 42"):
        Supervisor(echo, executor=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"timeout must be a positive number of seconds"):
        delegate_task("task", child=echo, timeout=10**400)


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan])
def test_bad_timeouts_are_caller_errors(timeout: float) -> None:
    """A non-positive or non-finite timeout raises ValueError instead of running."""
    with pytest.raises(ValueError, match="timeout"):
        delegate_task("task", child=echo, timeout=timeout)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: delegate_task(123, child=echo), TypeError, "the prompt must be a string, not int"),
        (lambda: delegate_task(None, child=echo), TypeError, "prompt must be a string, not None"),
        (lambda: delegate_task("x", child=echo, session_id=5), TypeError, "session_id must be"),
        (lambda: delegate_task("x", child=echo, subject=5), TypeError, "subject must be a string"),
        (lambda: delegate_task("x", child=echo, attempt=0), ValueError, "attempt .*, not 0"),
        (lambda: delegate_task("x", child=echo, attempt="2"), TypeError, "attempt .* not str"),
        (lambda: delegate_task("x", child=echo, context=[1, 2]), TypeError, "context must be a"),
        (
            lambda: lyra.delegate_with_retry("x", child=echo, base_timeout=-5),
            ValueError,
            "base_timeout must be a positive number",
        ),
        (lambda: lyra.delegate_with_retry("x", child=echo, max_retries="2"), ValueError, "retries"),
        (lambda: lyra.delegate_with_retry("x", child=echo, max_retries=True), ValueError, "retr"),
        (
            lambda: anyio.run(lambda: lyra.Supervisor(echo).run(["do this"])),
            TypeError,
            r"each task is a lyra.Task, not str \('do this'\): Task\(prompt=...\)",
        ),
        (lambda: anyio.run(lambda: lyra.Supervisor(echo).run("do this")), TypeError, "iterable of"),
        *(
            (lambda n=n: anyio.run(lambda: lyra.Supervisor(echo).run([], max_concurrency=n)),
             TypeError, "max_concurrency must be a whole number")
            for n in (1.5, "8", None, True)
        ),
    ],
)  # fmt: skip
def test_an_argument_of_the_wrong_type_is_the_callers_error_named_as_given(
    call: Any, error: type[Exception], message: str
) -> None:
    """A prompt that is no string is not "an empty prompt", a session id no string, a
    retry count no whole number, tasks no Tasks: each is refused before anything runs,
    naming the argument as the caller wrote it."""
    with pytest.raises(error, match=message):
        call()


def test_a_blocking_calls_error_carries_no_context_of_lyras_own() -> None:
    """What the blocking form raises reads as the caller's mistake alone: no "no running
    event loop" chained before it (the traceback a user sees)."""
    with pytest.raises(ValueError, match="timeout") as raised:
        delegate_task("task", child=echo, timeout=-1)
    assert raised.value.__context__ is None


def test_a_non_child_is_a_configuration_error() -> None:
    """Passing something that is no child agent raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="not a child agent"):
        delegate_task("task", child=42, timeout=5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("budget", "example"),
    [({"max_tokens": 5}, r"Budget\(\*\*budget\)"), (5, r"Budget\(max_tokens=")],
)
def test_a_budget_that_is_no_budget_is_a_type_error_showing_one(budget: Any, example: str) -> None:
    """A dict (the MCP tool's shape) or a number is refused before the child runs, with
    the Budget to write instead (it was an AttributeError from deep inside)."""
    ran: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        ran.append(prompt)
        return "done"

    with pytest.raises(TypeError, match=f"budget must be a lyra.Budget, e.g. {example}"):
        delegate_task("task", child=child, timeout=5, budget=budget)
    assert ran == []


@pytest.mark.parametrize(
    ("policy", "example"),
    [({"max_retries": 1}, r"RecoveryPolicy\(\*\*policy\)"), (5, r"RecoveryPolicy\(max_retries=")],
)
def test_a_policy_that_is_no_policy_is_a_type_error_showing_one(policy: Any, example: str) -> None:
    """A policy that is not a RecoveryPolicy is the caller's mistake, refused when the
    call or the supervisor is made: it was an AttributeError, or every task of a
    supervisor's run failing as "Internal error in lyra"; so is a context provider that
    cannot be called."""
    ran: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        ran.append(prompt)
        return "done"

    refused = f"policy must be a lyra.RecoveryPolicy, e.g. {example}"
    with pytest.raises(TypeError, match=refused):
        lyra.delegate_with_retry("task", child=child, policy=policy)
    with pytest.raises(TypeError, match=refused):  # (with max_retries, which it overrides)
        lyra.delegate_with_retry("task", child=child, policy=policy, max_retries=2)
    with pytest.raises(TypeError, match=refused):
        Supervisor(child, policy=policy)
    not_callable = "context_provider= must be a callable or None, not 5"
    with pytest.raises(TypeError, match=not_callable):
        lyra.delegate_with_retry("task", child=child, context_provider=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=not_callable):
        Supervisor(child, context_provider=5)  # type: ignore[arg-type]
    assert ran == []


async def test_no_child_and_no_key_is_a_configuration_error() -> None:
    """With no child, no LYRA_CHILD and no API key, the error says how to configure one."""
    with pytest.raises(ConfigurationError, match=r"LYRA_CHILD=module:attribute.*ANTHROPIC_API_KEY"):
        await adelegate_task("x")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("gpt", "is not module:attribute"),
        ("no_such_module_xyz:child", "cannot load the child"),
        ("lyra.proteins:no_such_thing", "cannot load the child"),
        ("lyra.settings:DEFAULT_MODEL", "is not a child agent"),
    ],
)
def test_a_bad_lyra_child_is_a_configuration_error(
    value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LYRA_CHILD must name a child as module:attribute; anything else says what is wrong."""
    monkeypatch.setenv("LYRA_CHILD", value)
    with pytest.raises(ConfigurationError, match=message):
        delegate_task("task", timeout=5)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('x = 1\nraise RuntimeError("no config file")\n', r"raised RuntimeError: no config "
         r"file \(at .*broken_child_\d\.py:2\)$"),
        ("def f(:\n    pass\n", r"raised SyntaxError: .*line 1"),
    ],
)  # fmt: skip
def test_a_child_module_whose_own_code_fails_to_import_is_a_configuration_error(
    source: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child module that raises as it is imported (or does not parse): one line saying
    what it raised and where, as a missing module does (the CLI's exit 2), never a
    traceback blamed on lyra."""
    name = f"broken_child_{len(source) % 10}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigurationError, match=message) as raised:
        lyra.ChildRef(target=f"{name}:agent").resolve()
    assert str(raised.value).startswith(f"cannot load the child {name}:agent: importing {name}")


WRAPPED_CHILDREN = """\
def deco(fn):
    def wrapper(*args, **kw):
        return fn(*args, **kw)
    return wrapper


@deco
def wrapped(prompt, ctx):
    return "wrapped " + prompt


def takes_anything(*args):
    return "anything " + args[0]


def broken():
    raise RuntimeError("no API key in the factory")
"""


@pytest.mark.parametrize(
    ("attribute", "output"),
    [("wrapped", "wrapped hi"), ("takes_anything", "anything hi")],
)
def test_a_child_that_could_be_called_with_no_arguments_is_no_factory(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, attribute: str, output: str
) -> None:
    """A decorator's ``wrapper(*args, **kw)`` or ``def child(*args)`` takes a child's
    (prompt, ctx) too: it is the child, never called at load time as a factory."""
    (tmp_path / "wrapped_children.py").write_text(WRAPPED_CHILDREN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    child = lyra.ChildRef(target=f"wrapped_children:{attribute}").resolve()
    assert parse_report(delegate_task("hi", child=child, timeout=5)).output == output


def test_a_factory_that_fails_says_which_child_it_was_building(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wrapped_children.py").write_text(WRAPPED_CHILDREN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = "cannot build the child wrapped_children:broken: no API key in the factory"
    with pytest.raises(ConfigurationError, match=message):
        lyra.ChildRef(target="wrapped_children:broken").resolve()


def test_every_entry_point_takes_a_child_ref() -> None:
    """delegate_task, delegate_with_retry and Supervisor.run run the child a ChildRef names
    (delegate_with_retry refused it as 'not a child agent')."""
    from lyra import Supervisor, Task, delegate_with_retry

    ref = lyra.ChildRef(target="fakes.children:spender")
    for report in (delegate_task("a", child=ref), delegate_with_retry("a", child=ref)):
        assert parse_report(report).output == "spent on: a"
    outcomes = anyio.run(Supervisor(ref).run, [Task(prompt="b")])
    assert outcomes[0].result.output == "spent on: b"


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        (lyra.ChildRef(target="no_such_module:x"), "no module named 'no_such_module'"),
        (
            lyra.ChildRef(target="fakes.children:spender", options={}),
            "options= makes fakes.children:spender a factory, and a child itself takes none",
        ),
    ],
)
def test_a_child_ref_that_cannot_be_built_is_the_callers_error_before_any_task(
    ref: lyra.ChildRef, says: str
) -> None:
    """A run whose ChildRef names no loadable child raises ConfigurationError before any
    task runs (every task failed as 'Internal error in lyra: … Report the error')."""
    from lyra import Supervisor, Task

    with pytest.raises(ConfigurationError, match=re.escape(says)):
        anyio.run(Supervisor(ref).run, [Task(prompt="a"), Task(prompt="b")])


def test_lyra_child_names_the_default_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """LYRA_CHILD=module:attribute is the child when none is passed (a class is built)."""
    monkeypatch.setenv("LYRA_CHILD", "lyra.proteins:ProteinChild")
    report = parse_report(delegate_task("Analyze P04637", timeout=10))
    assert report.status == "completed"


def test_with_a_key_the_default_child_is_the_anthropic_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ANTHROPIC_API_KEY alone makes the Anthropic child (with no workload's tools) the default."""
    from lyra.children import AnthropicChild, default_child

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    child = default_child()
    assert isinstance(child, AnthropicChild)
    assert child.tools == {}


async def test_context_tracks_tools_steps_and_files() -> None:
    """ctx.tool counts usage and the last successful tool; steps and files reach the failure,
    and the blocker names the tool that raised."""

    def ok_tool(x: int) -> int:
        return x * 2

    async def async_tool(x: int) -> int:
        return x + 1

    def failing_tool() -> None:
        raise RuntimeError("broken")

    async def child(prompt: str, ctx: ChildContext) -> str:
        assert await ctx.tool("double", ok_tool, 21) == 42
        assert await ctx.tool("inc", async_tool, x=1) == 2
        await ctx.tool("double", ok_tool, 1)
        ctx.step("did things")
        ctx.file_modified("out.txt")
        ctx.file_modified("out.txt")
        await ctx.tool("broken", failing_tool)
        return "never"

    result = await Supervisor(child).delegate("task", timeout=5)
    failure = result.failure
    assert failure is not None
    assert failure.tool_usage == {"double": 2, "inc": 1, "broken": 1}
    assert failure.last_successful_tool == "double"
    assert (failure.completed_steps, failure.files_modified) == (("did things",), ("out.txt",))
    assert "in tool 'broken'" in failure.evidence
    assert failure.blocked_on == "RuntimeError: broken (in tool 'broken')"
    assert "Blocked on: RuntimeError: broken (in tool 'broken')\n" in result.report


async def test_exception_groups_are_classified_by_their_first_error() -> None:
    """A child using a task group fails by the error inside the group."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        async def fail() -> None:
            raise ConnectionRefusedError("no route")

        async with anyio.create_task_group() as tg:
            tg.start_soon(fail)
        return "never"

    result = await Supervisor(child).delegate("task", timeout=5)
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("tool_error", "connection")


async def test_block_with_a_category_a_child_cannot_declare_is_refused() -> None:
    """ctx.block only accepts missing_context, invalid_task and tool_error."""

    async def child(prompt: str, ctx: ChildContext) -> str:
        ctx.block("timeout", "no")

    result = await Supervisor(child).delegate("task", timeout=5)
    assert result.failure is not None
    assert "can block only with one of" in result.failure.message


def test_a_plain_function_child_runs_in_a_thread_under_its_deadline() -> None:
    """A synchronous child is accepted, and its deadline holds while it blocks."""
    import time

    def quick(prompt: str, ctx: ChildContext) -> str:
        ctx.step("thought")
        return prompt[::-1]

    def blocks(prompt: str, ctx: ChildContext) -> str:
        time.sleep(2)
        return "late"

    assert parse_report(delegate_task("abc", child=quick, timeout=5)).output == "cba"
    started = time.perf_counter()
    report = parse_report(delegate_task("abc", child=blocks, timeout=0.2))
    assert report.category == "timeout"
    assert time.perf_counter() - started < 1.5


async def test_a_result_loads_from_its_own_dump() -> None:
    """A DelegationResult dumped to JSON (with its derived report) loads back equal."""
    result = await Supervisor(echo).delegate("hi", timeout=5)
    assert DelegationResult.model_validate_json(result.model_dump_json()) == result
    assert DelegationResult.model_validate(result.model_dump()).report == result.report


async def test_results_built_by_the_thousand_behave_as_validated_ones() -> None:
    """Results share their field names and fields-set (to be cheap to keep), yet dump,
    compare and copy as validated ones do: a copy with changes leaves the others alone."""
    supervisor = Supervisor(echo)
    first = await supervisor.delegate("a", timeout=5)
    second = await supervisor.delegate("b", timeout=5)
    every = set(DelegationResult.model_fields)
    assert first.model_fields_set == second.model_fields_set == every
    copy = first.model_copy(update={"duration": 9.0})
    assert (copy.duration, first.duration == 9.0) == (9.0, False)
    assert second.model_fields_set == every
    again = DelegationResult.model_validate(first.model_dump())
    assert again == first
    assert again.model_dump() == first.model_dump()


def test_a_builder_refuses_an_order_that_would_change_model_dump() -> None:
    """lyra's builders take every field, in the order model_dump gives them."""
    from lyra import ErrorType, FailureCategory
    from lyra.delegation._models import FailedDelegation, builder

    made = builder(FailedDelegation, "error_type", "session_id", "category")
    built = made(ErrorType.UNKNOWN, "child-1", FailureCategory.TIMEOUT)
    assert built == FailedDelegation(session_id="child-1", category=FailureCategory.TIMEOUT)
    assert list(built.model_dump()) == ["error_type", "session_id", "category"]
    with pytest.raises(ValueError, match="every field once"):
        builder(FailedDelegation, "session_id", "category", "error_type")
    with pytest.raises(ValueError, match="every field once"):
        builder(FailedDelegation, "error_type", "session_id")


def test_a_child_function_is_not_kept_alive_by_lyra() -> None:
    """lyra remembers a function child it checked (async or not) only while the
    function lives: the last reference gone, it is collected."""
    import gc
    import weakref

    async def child(prompt: str, ctx: ChildContext) -> str:
        return prompt

    def sync_child(prompt: str, ctx: ChildContext) -> str:
        return prompt

    for run in (child, sync_child):
        assert parse_report(delegate_task("x", child=run, timeout=5)).output == "x"
    gone = [weakref.ref(child), weakref.ref(sync_child)]
    del child, sync_child, run
    gc.collect()
    assert [ref() for ref in gone] == [None, None]


async def test_a_function_that_is_no_child_and_a_verify_that_is_no_callable_are_refused() -> None:
    """A function that cannot take (prompt, ctx), and a verify= or answer= that cannot be
    called, are the caller's mistakes: said before any task runs (a child that would run
    first is never called), not one failure report per task blamed on the child."""
    ran: list[str] = []

    async def child(prompt: str, ctx: ChildContext) -> str:
        ran.append(prompt)
        return "done"

    def no_arguments() -> str:
        return "done"

    with pytest.raises(ConfigurationError, match=r"no_arguments is not a child agent: it must"):
        await lyra.adelegate_task("x", child=no_arguments, timeout=5)

    def drafts(prompt: str, ctx: ChildContext) -> Any:  # (it ran: "returned generator")
        yield "draft"

    async def streamed(prompt: str, ctx: ChildContext) -> Any:
        yield "draft"

    for generator in (drafts, streamed):
        with pytest.raises(ConfigurationError, match=r"is a generator function, not a child"):
            await lyra.adelegate_task("x", child=generator, timeout=5)
    with pytest.raises(ConfigurationError, match=r"must take \(prompt, ctx\)"):
        await Supervisor(lambda prompt: prompt).run([lyra.Task(prompt="a"), lyra.Task(prompt="b")])

    class Researcher:
        async def run(self, prompt: str, ctx: ChildContext) -> str:
            ran.append(prompt)
            return "done"

    with pytest.raises(ConfigurationError, match=r"Researcher is a class.*Researcher\(\.\.\.\)"):
        await lyra.adelegate_task("x", child=Researcher, timeout=5)
    with pytest.raises(TypeError, match="verify= must be a callable or None, not 'yes'"):
        await lyra.adelegate_task("x", child=child, timeout=5, verify="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="answer= must be a callable or None, not 3"):
        Supervisor(child, answer=3)  # type: ignore[arg-type]
    assert ran == []

    def sync_child(prompt: str, ctx: ChildContext, *rest: Any) -> str:
        return f"ok {prompt}"

    assert (await lyra.adelegate_task("x", child=sync_child, timeout=5)).startswith("ok x")
