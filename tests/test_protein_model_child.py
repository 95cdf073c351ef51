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
    assert json.loads(answers[1])["mean_plddt"] == 75.06
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


async def test_the_model_gets_segment_and_feature_facts_and_is_told_to_invent_none() -> None:
    """analyze_structure answers the model with the segments, units and features the brief
    uses, and the system prompt forbids inventing numbers or ranking targets."""
    script = [
        *calls("fetch_protein", "analyze_structure", protein="P05067"),
        message([tool_use("finish", {"result": "APP brief"})], stop_reason="tool_use"),
    ]
    with MessagesAPI(script) as api:  # type: ignore[arg-type]
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            child = anthropic_protein_child(client=client)
            result = await Supervisor(child).delegate("Analyze P05067", timeout=10)
    assert result.output == "APP brief"
    system = api.requests[0]["system"]
    system_text = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    assert "Never invent a number" in system_text
    assert "not the protein's reliability" in system_text
    structure = json.loads(api.requests[2]["messages"][-1]["content"][0]["content"])
    ordered = [(s["start"], s["end"], s["mean_plddt"]) for s in structure["segments"]]
    assert (376, 569, 89.47) in ordered
    assert [u["where"] for u in structure["units"]] == ["30–189", "284–343", "376–569"]
    assert "plddt" not in structure  # bulky per-residue data never goes to the model


async def test_an_id_that_is_no_accession_is_not_looked_up_by_the_model_child() -> None:
    """fetch_protein refuses an ID that cannot be a UniProt accession as not found (why)."""
    with MessagesAPI(calls("fetch_protein", protein="P0463")) as api:  # type: ignore[arg-type]
        async with anthropic.AsyncAnthropic(base_url=api.url, api_key="k", max_retries=0) as client:
            child = anthropic_protein_child(client=client)
            result = await Supervisor(child).delegate("Analyze P0463", timeout=10)
    assert result.failure is not None
    assert (result.failure.category, result.failure.error_type) == ("invalid_task", "not_found")
    assert "is not a UniProt accession" in result.failure.message
