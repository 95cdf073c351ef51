"""The Anthropic child, with the real SDK against a local Messages API server."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from fakes.messages_api import (
    MessagesAPI,
    Reply,
    cut,
    error,
    interrupted,
    malformed,
    message,
    overloaded,
    paced,
    rate_limited,
    slow,
    stalled,
    text,
    tool_use,
)
from lyra import Budget, Supervisor, parse_report
from lyra.children import AnthropicChild, Price, Tool
from lyra.delegation._foreign import ANTHROPIC_ERRORS, Kind, describe

pytestmark = pytest.mark.anyio


def get_plddt(protein_id: str) -> str:
    """Mean pLDDT of a protein's AlphaFold model."""
    return json.dumps({"protein_id": protein_id, "mean_plddt": 75.05})


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    """Real SDK clients pointed at a fake server, closed after the test."""
    clients: list[anthropic.AsyncAnthropic] = []

    def make(api: MessagesAPI) -> anthropic.AsyncAnthropic:
        client = anthropic.AsyncAnthropic(base_url=api.url, api_key="test-key", max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def delegate(api: MessagesAPI, client_for: Any, timeout: float = 5.0) -> Any:
    child = AnthropicChild(tools=[get_plddt], client=client_for(api), model="claude-sonnet-5-5")
    return await Supervisor(child).delegate("How reliable is P04637?", timeout=timeout)


async def test_tool_use_conversation_finishes_with_the_result(client_for: Any) -> None:
    """Each tool_use runs through ctx.tool and the finish tool's result is the output."""
    script = [
        message([tool_use("get_plddt", {"protein_id": "P04637"})], stop_reason="tool_use"),
        message(
            [text("Reliable core."), tool_use("finish", {"result": "pLDDT 75.05: medium"})],
            stop_reason="tool_use",
        ),
    ]
    with MessagesAPI(script) as api:
        result = await delegate(api, client_for)
    assert (result.status, result.output) == ("completed", "pLDDT 75.05: medium")
    second = api.requests[1]["messages"]
    tool_result = second[-1]["content"][0]
    assert tool_result["type"] == "tool_result"
    assert json.loads(tool_result["content"]) == {"protein_id": "P04637", "mean_plddt": 75.05}
    assert {t["name"] for t in api.requests[0]["tools"]} == {
        "get_plddt",
        "finish",
        "report_blocker",
    }


async def test_report_blocker_ends_with_the_declared_category(client_for: Any) -> None:
    """The report_blocker tool becomes a failure of the declared category."""
    script = [
        message(
            [
                tool_use(
                    "report_blocker",
                    {"category": "missing_context", "reason": "Which protein is 'it'?"},
                )
            ],
            stop_reason="tool_use",
        )
    ]
    with MessagesAPI(script) as api:
        result = await delegate(api, client_for)
    assert result.failure.category == "missing_context"
    assert result.failure.blocked_on == "Which protein is 'it'?"
    assert result.failure.suggested_retry is False


@pytest.mark.parametrize(
    ("reply", "category", "retryable", "error_type"),
    [
        (message([text("cut")], stop_reason="max_tokens"), "partial", True, "data"),
        (message([text("no")], stop_reason="refusal"), "invalid_task", False, "data"),
        (rate_limited(7), "tool_error", True, "rate_limit"),
        (overloaded(), "tool_error", True, "rate_limit"),
        (error(500, "api_error", "boom"), "tool_error", True, "unknown"),
        (error(400, "invalid_request_error", "bad"), "invalid_task", False, "data"),
        (error(401, "authentication_error", "bad key"), "tool_error", False, "auth"),
        (error(404, "not_found_error", "model: nope"), "tool_error", False, "not_found"),
        (malformed(), "tool_error", True, "data"),
    ],
    ids=["max_tokens", "refusal", "429", "529", "500", "400", "401", "404", "malformed"],
)
async def test_model_outcomes_are_classified(
    client_for: Any, reply: Reply, category: str, retryable: bool, error_type: str
) -> None:
    """Stop reasons and API errors from the real SDK land in the right category."""
    with MessagesAPI([reply]) as api:
        result = await delegate(api, client_for)
    failure = result.failure
    assert (failure.category, failure.suggested_retry, failure.error_type) == (
        category,
        retryable,
        error_type,
    )


async def test_retry_after_of_a_429_is_kept(client_for: Any) -> None:
    """The retry-after header of a real 429 reaches the failure and its suggestion."""
    with MessagesAPI([rate_limited(7)]) as api:
        result = await delegate(api, client_for)
    assert result.failure.retry_after == 7.0
    assert "7s" in result.failure.suggested_actions[0]


async def test_pause_turn_continues_the_turn(client_for: Any) -> None:
    """A pause_turn stop sends the conversation back and the child goes on."""
    script = [
        message([text("thinking…")], stop_reason="pause_turn"),
        message([tool_use("finish", {"result": "done"})], stop_reason="tool_use"),
    ]
    with MessagesAPI(script) as api:
        result = await delegate(api, client_for)
    assert result.output == "done"
    assert api.requests[1]["messages"][-1]["role"] == "assistant"


async def test_reply_slower_than_the_deadline_is_a_timeout(client_for: Any) -> None:
    """A model call slower than the deadline ends as our timeout, promptly."""
    with MessagesAPI([slow(message("late"), 5)], strict=False) as api:
        started = time.perf_counter()
        result = await delegate(api, client_for, timeout=0.3)
        elapsed = time.perf_counter() - started
    assert result.failure.category == "timeout"
    assert elapsed < 3.0  # far below the 5 s reply, with slack for a loaded machine


async def test_tool_exception_propagates_as_tool_error(client_for: Any) -> None:
    """An exception inside a model-called tool fails the child, classified by its cause."""

    def flaky_lookup(protein_id: str) -> str:
        """Look a protein up."""
        raise ConnectionResetError("upstream reset")

    script = [message([tool_use("flaky_lookup", {"protein_id": "P04637"})], stop_reason="tool_use")]
    with MessagesAPI(script) as api:
        child = AnthropicChild(tools=[flaky_lookup], client=client_for(api))
        result = await Supervisor(child).delegate("look it up", timeout=5)
    assert (result.failure.category, result.failure.tool_usage) == (
        "tool_error",
        {"flaky_lookup": 1},
    )
    assert "flaky_lookup" in result.failure.evidence


async def test_unknown_tool_is_reported_back_to_the_model(client_for: Any) -> None:
    """A tool name the child does not have is answered as an error, not a crash."""
    script = [
        message([tool_use("delete_everything", {})], stop_reason="tool_use"),
        message([tool_use("finish", {"result": "ok"})], stop_reason="tool_use"),
    ]
    with MessagesAPI(script) as api:
        result = await delegate(api, client_for)
    answer = api.requests[1]["messages"][-1]["content"][0]
    assert answer["is_error"] is True
    assert result.output == "ok"


def test_tool_schema_comes_from_the_signature() -> None:
    """Tool.from_function builds the JSON schema from a typed signature and docstring."""
    tool = Tool.from_function(get_plddt)
    assert tool.description == "Mean pLDDT of a protein's AlphaFold model."
    assert tool.input_schema["required"] == ["protein_id"]
    assert tool.input_schema["properties"]["protein_id"]["type"] == "string"


def _sdk_exception_classes() -> list[type[BaseException]]:
    return sorted(
        (
            obj
            for _, obj in inspect.getmembers(anthropic, inspect.isclass)
            if issubclass(obj, BaseException)
        ),
        key=lambda cls: cls.__name__,
    )


def test_every_sdk_exception_class_is_mapped() -> None:
    """Each exception class the installed anthropic SDK exports has an explicit mapping."""
    unmapped = [
        cls.__name__ for cls in _sdk_exception_classes() if cls.__name__ not in ANTHROPIC_ERRORS
    ]
    assert unmapped == []


def test_spend_limits_are_not_retried_although_the_sdk_calls_them_rate_limits() -> None:
    """A spend limit subclasses RateLimitError in the SDK but maps to a permanent failure."""
    assert issubclass(anthropic.EnforcedSpendLimitReachedError, anthropic.RateLimitError)
    assert ANTHROPIC_ERRORS["EnforcedSpendLimitReachedError"][0] is Kind.PERMANENT


@pytest.mark.parametrize(
    ("error", "status", "error_type"),
    [
        (anthropic.ConflictError, 409, "unknown"),
        (anthropic.InternalServerError, 502, "unknown"),
        (anthropic.InternalServerError, 529, "rate_limit"),  # an overload, whatever the class
    ],
)
def test_a_class_of_many_statuses_names_its_status(
    error: type[anthropic.APIStatusError], status: int, error_type: str
) -> None:
    """An SDK class that stands for several statuses names the one it carries in the
    evidence (the README's promise for 409 and the 5xx); a 529 is a rate limit."""
    import httpx2

    response = httpx2.Response(status, request=httpx2.Request("POST", "http://127.0.0.1/"))
    cause = describe(error("m", response=response, body=None))
    assert (cause.kind, cause.error_type) == (Kind.TRANSIENT, error_type)
    assert cause.source == f"anthropic.{error.__name__}, HTTP {status}"


def test_connection_errors_map_without_a_response() -> None:
    """SDK errors raised before any response (connection, timeout) translate too."""
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    assert describe(anthropic.APIConnectionError(request=request)).kind is Kind.TRANSIENT
    assert describe(anthropic.APITimeoutError(request=request)).error_type == "timeout"


async def test_report_text_round_trips_for_model_failures(client_for: Any) -> None:
    """The rendered report of a model failure parses back to the same fields."""
    with MessagesAPI([rate_limited(3)]) as api:
        result = await delegate(api, client_for)
    parsed = parse_report(result.report)
    assert (parsed.category, parsed.retryable, parsed.session_id) == (
        "tool_error",
        True,
        result.session_id,
    )


async def test_bad_tool_input_is_sent_back_for_correction(client_for: Any) -> None:
    """A tool call with input that breaks the schema is answered as an error, not run."""
    calls: list[str] = []

    def lookup(protein_id: str) -> str:
        """Look a protein up."""
        calls.append(protein_id)
        return "found"

    script = [
        message([tool_use("lookup", {"accession": "P04637"})], stop_reason="tool_use"),
        message([tool_use("lookup", {"protein_id": "P04637"})], stop_reason="tool_use"),
        message([tool_use("finish", {"result": "found it"})], stop_reason="tool_use"),
    ]
    with MessagesAPI(script) as api:
        child = AnthropicChild(tools=[lookup], client=client_for(api))
        result = await Supervisor(child).delegate("look", timeout=5)
    first_answer = api.requests[1]["messages"][-1]["content"][0]
    assert first_answer["is_error"] is True
    assert "protein_id" in first_answer["content"]
    assert (calls, result.output) == (["P04637"], "found it")


# -- usage and budgets (DESIGN §12) ------------------------------------------------------


def tool_turn(**usage: int) -> Reply:
    return message(
        [tool_use("get_plddt", {"protein_id": "P04637"})], stop_reason="tool_use", usage=usage
    )


def finish_turn(**usage: int) -> Reply:
    return message([tool_use("finish", {"result": "ok"})], stop_reason="tool_use", usage=usage)


async def test_each_response_is_charged_from_its_usage(client_for: Any) -> None:
    """Tokens (cache reads and writes included), cost from the price table and one turn
    per model call are charged, and reach the result and the report."""
    script = [
        tool_turn(input_tokens=1000, output_tokens=200, cache_read_input_tokens=500),
        finish_turn(input_tokens=1200, output_tokens=100, cache_creation_input_tokens=40),
    ]
    with MessagesAPI(script) as api:
        result = await delegate(api, client_for)  # claude-sonnet-5-5: $2 / $10 per MTok
    assert result.ok
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.turns) == (2740, 300, 2)
    expected = (2200 * 2 + 300 * 10 + 500 * 0.2 + 40 * 2.5) / 1_000_000
    assert usage.cost_usd == pytest.approx(expected)
    report = parse_report(result.report)
    assert (report.tokens_used, report.turns) == (3040, 2)
    assert report.cost_usd == pytest.approx(expected)


async def test_a_turn_budget_stops_the_model_before_the_next_call(client_for: Any) -> None:
    """With max_turns=2 the third model call is never made, nor counted; the failure
    says why."""
    with MessagesAPI([tool_turn(), tool_turn()]) as api:
        child = AnthropicChild(tools=[get_plddt], client=client_for(api))
        result = await Supervisor(child, budget=Budget(max_turns=2)).delegate("x", timeout=5)
    assert len(api.requests) == 2
    failure = result.failure
    assert (failure.category, failure.error_type) == ("timeout", "budget")
    assert "max_turns=2 reached: 2 turns used, 1 more refused" in failure.evidence
    assert result.usage is not None
    assert result.usage.turns == 2
    assert not failure.suggested_retry


async def test_a_token_budget_caps_what_the_model_may_write(client_for: Any) -> None:
    """The request's max_tokens never exceeds what the token budget has left once the
    request's input (estimated, with its framing) is held too."""
    from lyra.children._meter import REQUEST_OVERHEAD

    script = [tool_turn(input_tokens=2500, output_tokens=200), finish_turn()]
    with MessagesAPI(script) as api:
        child = AnthropicChild(tools=[get_plddt], client=client_for(api), max_tokens=4096)
        await Supervisor(child, budget=Budget(max_tokens=5000)).delegate("x", timeout=5)
    first, second = (r["max_tokens"] for r in api.requests)
    assert first <= 5000 - REQUEST_OVERHEAD
    assert second <= 5000 - 2700 - REQUEST_OVERHEAD


async def test_a_model_cut_at_the_max_tokens_the_budget_left_is_out_of_budget(
    client_for: Any,
) -> None:
    """A response cut at the max_tokens a token budget capped is the budget running out
    (timeout / budget), not the model stopping early (partial, a continuation to retry);
    one cut at the child's own max_tokens is still partial."""
    cut = {"input_tokens": 2500, "output_tokens": 300}
    with MessagesAPI(
        [tool_turn(input_tokens=2500, output_tokens=200), message("cu", "max_tokens", usage=cut)]
    ) as api:
        child = AnthropicChild(tools=[get_plddt], client=client_for(api), max_tokens=4096)
        capped = await Supervisor(child, budget=Budget(max_tokens=5500)).delegate("x", timeout=5)
    assert api.requests[1]["max_tokens"] < 4096  # the budget's cap
    assert capped.failure is not None
    assert (capped.failure.category, capped.failure.error_type) == ("timeout", "budget")
    assert "the token budget left it" in capped.failure.message
    with MessagesAPI([message("cut", "max_tokens", usage={"output_tokens": 4096})]) as api:
        child = AnthropicChild(client=client_for(api), max_tokens=4096)
        own = await Supervisor(child).delegate("x", timeout=5)
    assert own.failure is not None
    assert own.failure.category == "partial"


async def test_the_price_table_can_be_overridden(client_for: Any) -> None:
    """prices= replaces the default price of a model (a negotiated rate, a new model)."""
    with MessagesAPI([finish_turn(input_tokens=1_000_000, output_tokens=0)]) as api:
        child = AnthropicChild(
            client=client_for(api), model="acme-model-1", prices={"acme-model": Price(0.5, 1.0)}
        )
        result = await Supervisor(child).delegate("x", timeout=5)
    assert result.usage.cost_usd == pytest.approx(0.5)


async def test_a_cost_budget_needs_a_known_price(client_for: Any) -> None:
    """A model with no price cannot keep a cost budget: a clear failure, no model call."""
    with MessagesAPI([]) as api:
        child = AnthropicChild(client=client_for(api), model="acme-model-1")
        budget = Budget(max_cost_usd=1.0)
        result = await Supervisor(child, budget=budget).delegate("x", timeout=5)
    assert api.requests == []
    assert "no price is known for the model 'acme-model-1'" in result.failure.message


async def test_running_out_of_model_turns_is_a_failure_with_evidence(client_for: Any) -> None:
    """A model that never finishes within the child's max_turns fails; it is no success,
    and it is timeout / budget as a framework's own limit of turns is (it said partial)."""
    with MessagesAPI([tool_turn(), tool_turn()]) as api:
        child = AnthropicChild(tools=[get_plddt], client=client_for(api), max_turns=2)
        result = await Supervisor(child).delegate("x", timeout=5)
    assert not result.ok
    assert "No result after 2 model turns" in result.failure.message
    assert (result.failure.category, result.failure.error_type) == ("timeout", "budget")
    assert result.usage.turns == 2


async def test_a_token_budget_stops_the_child_at_the_response_that_crosses_it(
    client_for: Any,
) -> None:
    """A request whose worst case (its estimated input and a token to answer) the budget
    has no room for is never sent: the child ends before it, out of budget, and its
    turn is not counted (turns counts the requests sent)."""
    ran: list[str] = []

    def lookup(protein_id: str) -> str:
        """Look a protein up."""
        ran.append(protein_id)
        return "found"

    script = [
        message([tool_use("lookup", {"protein_id": "A"})], "tool_use", usage={"input_tokens": 600}),
        message([tool_use("lookup", {"protein_id": "B"})], "tool_use", usage={"input_tokens": 600}),
    ]
    with MessagesAPI(script) as api:
        child = AnthropicChild(tools=[lookup], client=client_for(api))
        result = await Supervisor(child, budget=Budget(max_tokens=1000)).delegate("x", timeout=5)
    assert ran == ["A"]
    assert len(api.requests) == 1
    assert result.failure is not None
    assert "max_tokens=1000 reached: 605 tokens used" in result.failure.evidence
    assert "the least the next request needs" in result.failure.evidence
    assert result.usage.turns == 1
    assert parse_report(result.report).turns == 1


def _answer(result: str) -> Reply:
    return message([text("Done."), tool_use("finish", {"result": result})], stop_reason="tool_use")


async def test_a_model_writing_a_long_answer_is_not_idle(client_for: Any) -> None:
    """Responses are streamed: each event that arrives is a sign of life, so a model
    writing for 1.2 s under an idle timeout of 0.5 s is working, not idle. Awaited
    whole (``stream=False``), the same answer showed nothing until it ended and was cut
    off as idle."""
    for stream in (True, False):
        reply = paced(_answer("long"), 0.15) if stream else slow(_answer("long"), 1.2)
        with MessagesAPI([reply], strict=stream, streaming=stream) as api:
            child = AnthropicChild(client=client_for(api), model="claude-sonnet-4-6", stream=stream)
            result = await Supervisor(child).delegate("write", timeout=5, idle_timeout=0.5)
        if stream:
            assert (result.output, api.requests[0]["stream"]) == ("long", True)
        else:
            assert result.failure is not None
            assert (result.failure.category, result.failure.error_type) == ("timeout", "idle")


async def test_a_max_tokens_only_a_stream_may_ask_for_is_sent(client_for: Any) -> None:
    """The SDK refuses to await a ``max_tokens`` of 64,000 whole (its answer could take
    more than ten minutes); streamed, the request goes."""
    with MessagesAPI([_answer("ok")]) as api:
        child = AnthropicChild(client=client_for(api), max_tokens=64_000)
        result = await Supervisor(child).delegate("write", timeout=5)
    assert (result.output, api.requests[0]["max_tokens"]) == ("ok", 64_000)


async def test_a_stream_that_ends_early_or_stalls_is_no_answer(client_for: Any) -> None:
    """A stream whose connection ends before its message does is a transient failure
    (retryable), never the half message as an answer; one that stalls ends at the idle
    timeout."""
    with MessagesAPI([cut(_answer("half"), after_events=4)]) as api:
        child = AnthropicChild(client=client_for(api))
        result = await Supervisor(child).delegate("write", timeout=5)
    failure = result.failure
    assert (failure.category, failure.suggested_retry, failure.error_type) == (
        "tool_error",
        True,
        "data",
    )
    assert "stream ended before its message did" in failure.blocked_on
    with MessagesAPI([stalled(_answer("never"), after_events=3)]) as api:
        child = AnthropicChild(client=client_for(api))
        result = await Supervisor(child).delegate("write", timeout=5, idle_timeout=0.3)
    assert (result.failure.category, result.failure.error_type) == ("timeout", "idle")


@pytest.mark.parametrize(
    ("error_type", "category", "retryable", "fine"),
    [
        ("overloaded_error", "tool_error", True, "rate_limit"),
        ("api_error", "tool_error", True, "unknown"),
        ("invalid_request_error", "invalid_task", False, "data"),
        ("a_new_kind_of_error", "tool_error", True, "unknown"),
    ],
)
async def test_an_error_event_mid_stream_is_classified_by_its_type(
    client_for: Any, error_type: str, category: str, retryable: bool, fine: str
) -> None:
    """The API's trouble met mid-answer comes as an error event on a response whose
    status (200) was already sent: its type says what a status would (an overload is a
    529's rate limit, retried), never rule 10's "unrecognised error (HTTP 200)"."""
    with MessagesAPI([interrupted(_answer("half"), error_type)]) as api:
        child = AnthropicChild(client=client_for(api))
        result = await Supervisor(child).delegate("write", timeout=5)
    failure = result.failure
    assert (failure.category, failure.suggested_retry, failure.error_type) == (
        category,
        retryable,
        fine,
    )
    assert "error event in a stream" in failure.evidence


async def test_what_a_stream_that_broke_off_had_used_is_charged(client_for: Any) -> None:
    """A stream cut after the model wrote its answer, or one the deadline stopped mid
    answer, still charges the tokens it reported by then: spent, though no answer came
    (only a whole message's usage was counted, so a budget saw nothing)."""
    usage = {"input_tokens": 1200, "output_tokens": 800}
    broken = cut(message([text("long")], stop_reason="end_turn", usage=usage), after_events=5)
    with MessagesAPI([broken]) as api:
        child = AnthropicChild(client=client_for(api))
        result = await Supervisor(child).delegate("write", timeout=5, budget=Budget(max_turns=5))
    assert result.failure is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (1200, 800)
    hanging = stalled(message([text("long")], stop_reason="end_turn", usage=usage), 2)
    with MessagesAPI([hanging]) as api:
        child = AnthropicChild(client=client_for(api))
        result = await Supervisor(child).delegate("write", timeout=0.5)
    assert result.failure is not None
    assert result.failure.category == "timeout"
    assert result.usage.input_tokens == 1200  # (what message_start said; output as yet 1)
