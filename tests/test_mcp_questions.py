"""A child's question (``ctx.ask``) under ``lyra mcp``: put to the client as an MCP
elicitation where it declared that capability; otherwise the attempt of
``delegate_task`` ends ``missing_context`` / ``input_required`` with the question in
its report, and a detached delegation waits in ``input_required`` until
``answer_delegation`` answers it. Through the official SDK's client over stdio and
over Streamable HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult

from fakes import lyra_mcp
from fakes.lyra_mcp import report_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def fields(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content (there must be one)."""
    assert result.structured_content is not None, result
    return result.structured_content


async def test_a_question_goes_to_a_client_that_takes_elicitations(tmp_path: Path) -> None:
    """Over stdio (protocol 2025-11-25), the client that declares elicitation is asked
    the child's question (a form with one answer field) mid-call: its answer reaches
    the child, which finishes; a declined question ends the attempt as
    missing_context / input_required, the question in its report."""
    replies = [
        ElicitResult(action="accept", content={"answer": "Homo sapiens"}),
        ElicitResult(action="decline"),
    ]
    asked: list[ElicitRequestParams] = []

    async def on_elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return replies.pop(0)

    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as errlog:
        async with lyra_mcp.stdio(
            "--child", "fakes.children:asker", errlog=errlog, elicitation_callback=on_elicit
        ) as session:
            accepted = await session.call_tool("delegate_task", {"prompt": "Study p53"})
            declined = await session.call_tool("delegate_task", {"prompt": "Study p53"})
    assert [params.message for params in asked] == ["Which organism?"] * 2
    assert list(asked[0].requested_schema["properties"]) == ["answer"]  # type: ignore[union-attr]
    assert report_of(accepted).startswith("studied Homo sapiens\n")
    assert (fields(declined)["category"], fields(declined)["error_type"]) == (
        "missing_context",
        "input_required",
    )
    assert fields(declined)["question"] == "Which organism?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lyra_mcp.Served]:
    """``lyra mcp --http`` serving the asking child."""
    log = tmp_path_factory.mktemp("questions") / "stderr.txt"
    with lyra_mcp.http("--child", "fakes.children:asker", log=log) as served:
        yield served


@pytest.mark.parametrize("callback", [False, True], ids=["no elicitation", "2026-07-28"])
async def test_where_nobody_can_be_asked_the_report_carries_the_question(
    server: lyra_mcp.Served, callback: bool
) -> None:
    """A client that takes no elicitation, or one on protocol 2026-07-28 (a server sends
    no requests to the client there), gets the attempt's report: missing_context /
    input_required, the question in it, the steps before it."""
    asked: list[ElicitRequestParams] = []

    async def on_elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return ElicitResult(action="accept", content={"answer": "never"})

    async with Client(server.url, elicitation_callback=on_elicit if callback else None) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("delegate_task", {"prompt": "Study p53"})
    report = fields(result)
    assert (report["status"], report["category"], report["error_type"]) == (
        "failed",
        "missing_context",
        "input_required",
    )
    assert report["question"] == "Which organism?"
    assert report["completed_steps"] == ["Read the task"]
    assert "Which organism?" in report_of(result)
    assert asked == []


async def test_a_detached_delegations_question_waits_for_answer_delegation(
    server: lyra_mcp.Served,
) -> None:
    """delegation_result stops waiting when the child asks: state input_required with
    the question; answer_delegation answers it, the child goes on and finishes with
    the answer. A blank answer, or answering again, is a tool error that says why (the
    blank one leaves the question waiting)."""
    async with Client(server.url) as client:
        key = fields(await client.call_tool("start_delegation", {"prompt": "Study p53"}))[
            "delegation_id"
        ]
        waiting = await client.call_tool("delegation_result", {"delegation_id": key, "wait": 20})
        blank = await client.call_tool("answer_delegation", {"delegation_id": key, "answer": " "})
        status = fields(await client.call_tool("delegation_status", {"delegation_id": key}))
        answered = fields(
            await client.call_tool(
                "answer_delegation", {"delegation_id": key, "answer": "Mus musculus"}
            )
        )
        result = await client.call_tool("delegation_result", {"delegation_id": key, "wait": 20})
        again = await client.call_tool(
            "answer_delegation", {"delegation_id": key, "answer": "again"}
        )
    assert (fields(waiting)["state"], fields(waiting)["question"]) == (
        "input_required",
        "Which organism?",
    )
    assert "Which organism?" in report_of(waiting)
    assert "answer_delegation" in report_of(waiting)
    assert blank.is_error is True
    assert "the answer is empty" in report_of(blank)
    assert "Which organism?" in report_of(blank)
    assert (status["state"], status["question"]) == ("input_required", "Which organism?")
    assert (answered["state"], answered["question"]) == ("working", None)
    assert report_of(result).startswith("studied Mus musculus\n")
    assert fields(result)["steps"] == ["Read the task", "Looked up Mus musculus"]
    assert again.is_error is True
    assert "waits for no answer" in report_of(again)
