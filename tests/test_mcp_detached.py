"""Detached delegations over MCP, through the official SDK's client: start now, collect
later (from another session: a client that disconnects loses nothing), cancel, list;
with ``--durable``, a server killed mid-child restarts with every delegation and runs
no finished attempt twice."""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult

from fakes import lyra_mcp
from fakes.lyra_mcp import report_of
from lyra import parse_report

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def fields(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content (there must be one)."""
    assert result.structured_content is not None, result
    return result.structured_content


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lyra_mcp.Served]:
    """One in-memory ``lyra mcp --http`` for the module, serving the gated child."""
    log = tmp_path_factory.mktemp("detached") / "stderr.txt"
    with lyra_mcp.http("--child", "fakes.children:gated", log=log) as served:
        yield served


async def test_a_delegation_started_by_one_client_is_collected_by_another(
    server: lyra_mcp.Served, tmp_path: Path
) -> None:
    """start_delegation answers at once; the client leaves; another client sees it in
    list_delegations with its steps so far, and delegation_result (waiting) returns
    the same report text and fields delegate_task would."""
    gate = tmp_path / "gate"
    async with Client(server.url) as first:
        started = fields(await first.call_tool("start_delegation", {"prompt": str(gate)}))
    key = started["delegation_id"]
    assert started["state"] == "working"
    async with Client(server.url) as second:
        listed = fields(await second.call_tool("list_delegations", {}))["delegations"]
        status = fields(await second.call_tool("delegation_status", {"delegation_id": key}))
        gate.touch()
        result = await second.call_tool("delegation_result", {"delegation_id": key, "wait": 20})
    assert key in [entry["delegation_id"] for entry in listed]
    assert (status["state"], status["steps"]) == ("working", ["waiting at the gate"])
    assert 0 < status["time_left"] <= 300
    report = report_of(result)
    assert report.startswith("gate opened\n")
    done = fields(result)
    assert done["state"] == "completed"
    assert done["steps"] == ["waiting at the gate", "through the gate"]
    assert done["report"] == parse_report(report).model_dump(mode="json")


async def test_cancel_and_a_short_wait_and_an_unknown_id(server: lyra_mcp.Served) -> None:
    """A short wait says the delegation is still working (text a model can act on);
    cancel_delegation stops it without a report; an unknown id is a tool error that
    says why, and so is a wait given as text."""
    async with Client(server.url) as client:
        key = fields(await client.call_tool("start_delegation", {"prompt": "/nonexistent"}))[
            "delegation_id"
        ]
        waited = await client.call_tool("delegation_result", {"delegation_id": key, "wait": 0})
        cancelled = await client.call_tool("cancel_delegation", {"delegation_id": key})
        after = await client.call_tool("delegation_result", {"delegation_id": key, "wait": 0})
        unknown = await client.call_tool("delegation_status", {"delegation_id": "d-nope"})
        texts = await client.call_tool("delegation_result", {"delegation_id": key, "wait": "3"})
    assert texts.is_error is True  # a number as the schema says, as a timeout is
    assert fields(waited)["state"] == "working"
    assert "is still working" in report_of(waited)
    assert fields(cancelled)["state"] == "cancelled"
    assert (fields(after)["state"], fields(after)["report"]) == ("cancelled", None)
    assert "was cancelled" in report_of(after)
    assert unknown.is_error is True
    assert "no delegation 'd-nope' here" in report_of(unknown)


async def test_detached_delegations_over_stdio(tmp_path: Path) -> None:
    """The same tools over stdio (protocol 2025-11-25): start, then the report."""
    with (tmp_path / "stderr.txt").open("w+", encoding="utf-8") as errlog:
        async with lyra_mcp.stdio("--child", "fakes.children:spender", errlog=errlog) as session:
            started = fields(await session.call_tool("start_delegation", {"prompt": "Go"}))
            key = started["delegation_id"]
            result = await session.call_tool("delegation_result", {"delegation_id": key})
    assert report_of(result).startswith("spent on: Go\n")
    assert fields(result)["tokens_used"] == 1200


def invocations(log: Path) -> Counter[str]:
    """How many times each delegation's attempt started (the durable engine's test log)."""
    if not log.exists():
        return Counter()
    return Counter(line.split("\t")[0].split("/")[1] for line in log.read_text().splitlines())


async def test_a_durable_server_killed_mid_child_loses_nothing_and_pays_nothing_twice(
    tmp_path: Path,
) -> None:
    """With --durable, SIGKILL while one delegation runs and another's question waits:
    the restarted server lists all four; the finished one returns its recorded report
    without running again, the cancelled one stays cancelled, the interrupted one
    runs again from its start and finishes, and the question still waits (in the
    database, its ended attempt's time_left 0): answered, its attempt runs again with the
    answer waiting in ctx.ask.
    A second server on the same state directory is refused meanwhile."""
    state, log = tmp_path / "state", tmp_path / "invocations.tsv"
    args = ("--child", "fakes.children:plodder", "--durable", "--state-dir", str(state))
    env = {"LYRA_TEST_INVOCATION_LOG": str(log)}
    with lyra_mcp.http(*args, log=tmp_path / "first.txt", env=env) as first:
        with anyio.fail_after(60):
            second = await anyio.run_process(
                [sys.executable, "-m", "lyra", "mcp", *args, "--http", "--port", "0"],
                env={**os.environ, "PYTHONPATH": str(lyra_mcp.TESTS)},
                check=False,
            )
        async with Client(first.url) as client:
            done = fields(await client.call_tool("start_delegation", {"prompt": "1x0.01"}))
            done_report = report_of(
                await client.call_tool(
                    "delegation_result", {"delegation_id": done["delegation_id"], "wait": 20}
                )
            )
            dropped = fields(await client.call_tool("start_delegation", {"prompt": "50x1"}))
            await client.call_tool("cancel_delegation", {"delegation_id": dropped["delegation_id"]})
            asks = fields(await client.call_tool("start_delegation", {"prompt": "ask"}))
            asked = await client.call_tool(
                "delegation_result", {"delegation_id": asks["delegation_id"], "wait": 20}
            )
            # (steps long enough that a loaded machine still kills it mid-attempt)
            cut = fields(await client.call_tool("start_delegation", {"prompt": "4x0.5"}))
            for _ in range(1000):  # until its attempt has begun (at most 20 s)
                status = await client.call_tool(
                    "delegation_status", {"delegation_id": cut["delegation_id"]}
                )
                if fields(status)["steps"]:
                    break
                await anyio.sleep(0.02)
            os.kill(first.process.pid, signal.SIGKILL)
    assert second.returncode == 2
    assert b"another lyra mcp serves the state directory" in second.stderr
    before = invocations(log)
    with lyra_mcp.http(*args, log=tmp_path / "again.txt", env=env) as again:
        async with Client(again.url) as client:
            listed = fields(await client.call_tool("list_delegations", {}))["delegations"]
            still = await client.call_tool(
                "delegation_result", {"delegation_id": asks["delegation_id"], "wait": 20}
            )
            await client.call_tool(
                "answer_delegation", {"delegation_id": asks["delegation_id"], "answer": "yeast"}
            )
            results = {
                key["delegation_id"]: await client.call_tool(
                    "delegation_result", {"delegation_id": key["delegation_id"], "wait": 20}
                )
                for key in (done, dropped, cut, asks)
            }
        assert again.stop() == 0
    states = {entry["delegation_id"]: entry["state"] for entry in listed}
    assert states == {
        done["delegation_id"]: "completed",
        dropped["delegation_id"]: "cancelled",
        cut["delegation_id"]: states[cut["delegation_id"]],  # resumed: it may have finished
        asks["delegation_id"]: states[asks["delegation_id"]],  # its question found again
    }
    assert states[cut["delegation_id"]] in ("working", "completed")
    for waiting in (asked, still):
        assert (fields(waiting)["state"], fields(waiting)["question"]) == (
            "input_required",
            "Which organism?",
        )
    assert fields(asked)["time_left"] == 0  # its attempt ended: the question waits for the next
    answered = results[asks["delegation_id"]]
    assert report_of(answered).startswith("studied yeast\n")
    assert fields(answered)["report"]["attempt"] == 2
    assert report_of(results[done["delegation_id"]]) == done_report  # recorded, not rerun
    assert fields(results[dropped["delegation_id"]])["state"] == "cancelled"
    assert report_of(results[cut["delegation_id"]]).startswith("plodded 4 steps\n")
    assert before == {
        done["delegation_id"]: 1,
        dropped["delegation_id"]: 1,
        cut["delegation_id"]: 1,
        asks["delegation_id"]: 1,
    }
    assert invocations(log) == {
        done["delegation_id"]: 1,
        dropped["delegation_id"]: 1,
        cut["delegation_id"]: 2,  # killed mid-attempt: that attempt alone ran again
        asks["delegation_id"]: 2,  # the attempt after the answer
    }
