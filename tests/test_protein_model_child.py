"""The Anthropic protein child: the pipeline's stages as tools, driven by a scripted model."""

from __future__ import annotations

import json

import anthropic
import pytest

from fakes.messages_api import MessagesAPI, message, text, tool_use
from lyra import Supervisor
from lyra.proteins import anthropic_protein_child, protein_tools

pytestmark = pytest.mark.anyio


def calls(*names: str, protein: str = "P04637") -> list[object]:
    return [
        message([tool_use(name, {"protein_id": protein})], stop_reason="tool_use") for name in names
    ]


async def test_model_runs_the_pipeline_with_real_figures() -> None:
    """A model calling the stage tools gets real figures back and finishes with the brief."""
    script = [
        *calls("fetch_protein", "analyze_structure", "reason", "critique", "synthesize"),
        message(
            [text("done"), tool_use("finish", {"result": "p53 brief"})], stop_reason="tool_use"
        ),
    ]
    with MessagesAPI(script) as api:  # type: ignore[arg-type]
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            child = anthropic_protein_child(client=client)
            result = await Supervisor(child).delegate("Analyze P04637", timeout=10)
    assert result.output == "p53 brief"
    answers = [r["messages"][-1]["content"][0]["content"] for r in api.requests[1:]]
    assert json.loads(answers[0])["gene"] == "TP53"
    assert json.loads(answers[1])["mean_plddt"] == 75.05
    assert "Cellular tumor antigen p53" in answers[4]
    assert "sequence" not in answers[0]  # bulky data never goes to the model


async def test_missing_protein_fails_the_child_as_invalid_task() -> None:
    """fetch_protein for a protein that does not exist fails the child (rule 4)."""
    with MessagesAPI(calls("fetch_protein", protein="XXXXX")) as api:  # type: ignore[arg-type]
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            child = anthropic_protein_child(client=client)
            result = await Supervisor(child).delegate("Analyze XXXXX", timeout=10)
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("invalid_task", "not_found")


def test_stages_out_of_order_are_refused() -> None:
    """A stage called before fetch_protein is refused with a clear message."""
    tools = {tool.name: tool for tool in protein_tools()}
    with pytest.raises(ValueError, match="run fetch_protein for P04637 first"):
        tools["reason"].fn("P04637")


def test_bad_ids_are_refused_before_any_request() -> None:
    """An injection string as protein ID is refused by the tool itself."""
    tools = {tool.name: tool for tool in protein_tools()}
    with pytest.raises(ValueError, match="Invalid protein ID"):
        tools["fetch_protein"].fn("P04637; rm -rf /")


def test_the_model_protein_child_has_the_pipeline_stages_as_tools() -> None:
    """anthropic_protein_child exposes the five stages (the core's default child has none)."""
    child = anthropic_protein_child()
    assert set(child.tools) == {
        "fetch_protein",
        "analyze_structure",
        "reason",
        "critique",
        "synthesize",
    }
