"""The detached-delegation tools: start now, come back for the report later.

Each is a thin call on the server's :class:`~lyra.detached.Delegations`
store, so a client that disconnects loses nothing: the delegations belong to
the server, not to the session that started them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from lyra.delegation import render_report
from lyra.detached import (
    DelegationRequest,
    Delegations,
    DelegationStatus,
    NoQuestion,
    UnknownDelegation,
)
from lyra.mcp._arguments import BudgetLimits, IdleTimeout, Prompt, Timeout
from lyra.mcp._progress import report_progress
from lyra.mcp._stopping import Calls

MAX_WAIT = 600.0
"""Most seconds ``delegation_result`` waits in one call."""

Id = Annotated[str, Field(description="The id start_delegation returned.")]


class DelegationList(BaseModel):
    """Every delegation the server knows, newest first."""

    model_config = ConfigDict(frozen=True)

    delegations: list[DelegationStatus]


@dataclass(frozen=True)
class Tool:
    """A tool function with what the server lists about it."""

    fn: Callable[..., Any]
    name: str
    title: str
    description: str
    annotations: ToolAnnotations


def detached_tools(store: Delegations, *, progress_every: float, calls: Calls) -> list[Tool]:
    """The tools over ``store``; a wait in ``delegation_result`` ends with the status as
    it stands when the server stops (``calls``)."""

    async def start_delegation(
        prompt: Prompt,
        timeout: Timeout = 300.0,
        idle_timeout: IdleTimeout = None,
        budget: BudgetLimits = None,
    ) -> DelegationStatus:
        request = DelegationRequest(
            prompt=prompt, timeout=timeout, idle_timeout=idle_timeout, budget=budget
        )
        return await store.start(request)

    async def delegation_status(delegation_id: Id) -> DelegationStatus:
        with _known():
            return store.status(delegation_id)

    async def delegation_result(
        delegation_id: Id,
        ctx: Context,
        wait: Annotated[
            float,
            Field(
                ge=0,
                le=MAX_WAIT,
                allow_inf_nan=False,
                strict=True,  # (as the delegating tools' numbers: never "5" read as one)
                description="Seconds to wait for the report if it is not ready (progress "
                "notifications go out meanwhile, when asked for).",
            ),
        ] = 30.0,
    ) -> Annotated[CallToolResult, DelegationStatus]:
        with _known():
            with calls.call() as call:
                async with anyio.create_task_group() as progress:
                    progress.start_soon(
                        lambda: report_progress(
                            ctx, delegation_id, total=None, every=progress_every
                        )
                    )
                    status = await store.result(delegation_id, wait)
                    progress.cancel_scope.cancel()
            if call.cancelled_caught:  # the server stops: the status as it stands
                status = store.status(delegation_id)
        return CallToolResult(
            content=[TextContent(type="text", text=_text(status))],
            structured_content=status.model_dump(mode="json"),
        )

    async def cancel_delegation(delegation_id: Id) -> DelegationStatus:
        with _known():
            return await store.cancel(delegation_id)

    async def list_delegations() -> DelegationList:
        return DelegationList(delegations=store.list())

    async def answer_delegation(
        delegation_id: Id,
        answer: Annotated[str, Field(description="The answer to the child's question.")],
    ) -> DelegationStatus:
        with _known():
            try:
                return store.answer(delegation_id, answer)
            except ValueError as blank:  # the question still waits: the model can answer it
                raise ToolError(str(blank)) from None

    changes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
    reads = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    return [
        Tool(
            fn=start_delegation,
            name="start_delegation",
            title="Start a delegation in the background",
            description=_START,
            annotations=changes,
        ),
        Tool(
            fn=delegation_status,
            name="delegation_status",
            title="A delegation's status",
            description=_STATUS,
            annotations=reads,
        ),
        Tool(
            fn=delegation_result,
            name="delegation_result",
            title="A delegation's report",
            description=_RESULT,
            annotations=reads,
        ),
        Tool(
            fn=cancel_delegation,
            name="cancel_delegation",
            title="Cancel a delegation",
            description=_CANCEL,
            annotations=ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True
            ),
        ),
        Tool(
            fn=list_delegations,
            name="list_delegations",
            title="List the delegations",
            description=_LIST,
            annotations=reads,
        ),
        Tool(
            fn=answer_delegation,
            name="answer_delegation",
            title="Answer a delegation's question",
            description=_ANSWER,
            annotations=changes,
        ),
    ]


@contextmanager
def _known() -> Iterator[None]:
    """An unknown id (or no question to answer) is a tool error the model can read
    (raised here, or from a task group)."""
    try:
        yield
    except* (UnknownDelegation, NoQuestion) as unknown:
        raise ToolError(str(unknown.exceptions[0])) from None


def _text(status: DelegationStatus) -> str:
    """The report once there is one (the text delegate_task returns); else a line
    saying where the delegation is."""
    if status.report is not None and status.finished:
        return render_report(status.report)
    if status.state == "cancelled":
        return f"{status.delegation_id} was cancelled; it has no report."
    if status.state == "input_required":
        return (
            f"{status.delegation_id} waits for an answer to its child's question: "
            f"{status.question}\nAnswer it with answer_delegation."
        )
    last = f"; last step: {status.steps[-1]}" if status.steps else ""
    left = f"; {status.time_left:.0f} s left" if status.time_left is not None else ""
    return (
        f"{status.delegation_id} is still working ({len(status.steps)} steps so far{last}{left}). "
        "Call delegation_result again later."
    )


_START = """\
Start the child agent on `prompt` in the background and return at once with a \
delegation_id (state "working"). Collect the report with delegation_result, \
follow it with delegation_status, stop it with cancel_delegation. Use this for \
long tasks, or to run several at once; delegate_task waits instead."""

_STATUS = """\
Where a delegation is now: state (working, input_required, completed, failed, \
cancelled), the steps its child completed so far, tokens, cost and turns spent, \
seconds left before its deadline, the question it waits on (state \
input_required: answer it with answer_delegation), and the report once it \
finished."""

_RESULT = """\
The report of a delegation: the same text and fields delegate_task returns, \
once the child finished. If it is still working, waits up to `wait` seconds \
(less if its child asks a question: answer it with answer_delegation), then \
says where it is (call again later). A failure is a normal result: read \
its category and retryable fields before starting another."""

_CANCEL = """\
Stop a delegation's child. It ends "cancelled", without a report; a finished \
delegation is left as it is, and so is one whose child finished as the cancel came: \
the answer is the delegation's final state (then "completed" with its report)."""

_ANSWER = """\
Answer the question a delegation's child waits on (state "input_required"; \
delegation_status and delegation_result show the question). The child goes on \
with the answer. A blank answer is refused; the question still waits."""

_LIST = """\
Every delegation the server knows, newest first, with its status. Finished \
ones are kept for a while (see expires_at), then forgotten."""
