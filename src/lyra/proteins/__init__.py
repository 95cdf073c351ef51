"""The protein workload: IDs, data sources, pipeline stages, and ``analyze``.

Built only on lyra's public API, as your own workload would be: a child
(:class:`ProteinChild`, or :func:`anthropic_protein_child` with a model), its
decomposition rule (``ProteinChild.decompose``), and an application
(:func:`analyze`) that hands each protein to a :class:`lyra.Supervisor`.
"""

from lyra.proteins._aliases import resolve_protein_id
from lyra.proteins._analysis import (
    analyze_structure,
    critique,
    reason,
    structure_summary,
    synthesize,
)
from lyra.proteins._analyze import UNFINISHED, analyze, analyze_sync, entry_for, requested_ids
from lyra.proteins._faults import Fault, parse_fault
from lyra.proteins._ids import find_protein_ids, normalize_protein_id, validate_protein_id
from lyra.proteins._live import LiveSource
from lyra.proteins._model_child import anthropic_protein_child, protein_tools
from lyra.proteins._offline import OfflineSource
from lyra.proteins._output import (
    AnalysisOutput,
    CompletedAnalysis,
    FailedAnalysis,
    PartialAnalysis,
    ProteinEntry,
    Summary,
)
from lyra.proteins._pipeline import (
    FULL_PLAN,
    STRUCTURE_PLAN,
    ProteinChild,
    ProteinState,
    TaskResult,
    protein_child,
)
from lyra.proteins._planner import QuestionPlan, plan_by_rules, plan_question
from lyra.proteins._request import AnalyzeRequest
from lyra.proteins._sources import ProteinSource
from lyra.proteins._validate import process_protein, validate_response

__all__ = [
    "FULL_PLAN",
    "STRUCTURE_PLAN",
    "UNFINISHED",
    "AnalysisOutput",
    "AnalyzeRequest",
    "CompletedAnalysis",
    "FailedAnalysis",
    "Fault",
    "LiveSource",
    "OfflineSource",
    "PartialAnalysis",
    "ProteinChild",
    "ProteinEntry",
    "ProteinSource",
    "ProteinState",
    "QuestionPlan",
    "Summary",
    "TaskResult",
    "analyze",
    "analyze_structure",
    "analyze_sync",
    "anthropic_protein_child",
    "critique",
    "entry_for",
    "find_protein_ids",
    "normalize_protein_id",
    "parse_fault",
    "plan_by_rules",
    "plan_question",
    "process_protein",
    "protein_child",
    "protein_tools",
    "reason",
    "requested_ids",
    "resolve_protein_id",
    "structure_summary",
    "synthesize",
    "validate_protein_id",
    "validate_response",
]
