"""LangGraph's and langchain-core's exceptions (``langgraph``, ``langchain_core``).

A test walks the installed packages' exception classes and fails on one that
is not mapped here, so a new release cannot slip past. The framework is never
imported: classes are recognised by module and class name. Chat models' own
provider errors (``anthropic``, ``openai``) propagate from a graph unwrapped
and are translated by those SDKs' modules::

    langgraph.errors
    ├── GraphRecursionError      recursion_limit reached     rule 1: timeout/budget
    ├── NodeTimeoutError         a node's TimeoutPolicy      rule 1: timeout/timeout,
    │                                                        or timeout/idle (kind="idle")
    ├── EmptyInputError          no input                    rule 3
    ├── GraphDrained             drained at a step boundary  rule 6 (the checkpoint resumes)
    └── GraphBubbleUp …          control flow, never surfaced at the root: rule 10
    langgraph.prebuilt.ToolInvocationError   bad tool arguments from the model: rule 6
    langchain_core
    ├── ToolException            a tool failed: rule 10, or what it was raised from
    ├── OutputParserException    malformed model output: rule 6 (another try may parse)
    └── ModelError               provider-neutral model errors, by the HTTP status
        │                        they stand for (429 rule 6 … 401 rule 8, 400 rule 9)
        └── ModelRefusalError, ContextOverflowError   the task itself: rule 9
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import (
    Cause,
    Kind,
    by_status,
    from_table,
    nearest,
    unmapped,
)

_K, _E = Kind, ErrorType

LANGGRAPH_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    # langgraph: the graph's own limits
    "GraphRecursionError": (_K.BUDGET, _E.BUDGET),
    "NodeTimeoutError": (_K.BUDGET, _E.TIMEOUT),  # kind="idle": refined below
    # langgraph: the run itself
    "EmptyInputError": (_K.INVALID_INPUT, _E.DATA),
    "GraphDrained": (_K.TRANSIENT, _E.UNKNOWN),  # stopped on request; its checkpoint resumes
    "InvalidUpdateError": (_K.UNKNOWN, _E.UNKNOWN),  # the graph's own bug
    "EmptyChannelError": (_K.UNKNOWN, _E.UNKNOWN),
    "NodeCancelledError": (_K.UNKNOWN, _E.UNKNOWN),  # a node raised CancelledError itself
    "TaskNotFound": (_K.UNKNOWN, _E.UNKNOWN),
    "UnknownInterruptError": (_K.UNKNOWN, _E.UNKNOWN),
    "RemoteException": (_K.UNKNOWN, _E.UNKNOWN),  # a RemoteGraph's server failed the run
    "InvalidNamespaceError": (_K.UNKNOWN, _E.UNKNOWN),  # a store namespace the graph built wrong
    "InvalidModuleError": (_K.UNKNOWN, _E.DATA),  # a checkpoint names a module it may not load
    # Control flow, suppressed by the root graph; seen only when a graph misuses it.
    "GraphBubbleUp": (_K.UNKNOWN, _E.UNKNOWN),
    "GraphInterrupt": (_K.UNKNOWN, _E.UNKNOWN),
    "NodeInterrupt": (_K.UNKNOWN, _E.UNKNOWN),
    "ParentCommand": (_K.UNKNOWN, _E.UNKNOWN),
    # Tools: the model's arguments failed validation (ToolNode raises it when its
    # handle_tool_errors does not turn it into a message); another try may call right.
    "ToolInvocationError": (_K.TRANSIENT, _E.DATA),
    "ToolException": (_K.UNKNOWN, _E.UNKNOWN),  # refined by what it was raised from
    "SchemaAnnotationError": (_K.UNKNOWN, _E.UNKNOWN),  # a tool's signature is wrong
    # langchain-core: models, whatever the provider
    "LangChainException": (_K.UNKNOWN, _E.UNKNOWN),
    "ModelError": (_K.UNKNOWN, _E.UNKNOWN),  # refined by a status code
    "ModelAuthenticationError": (_K.PERMANENT, _E.AUTH),
    "ModelPermissionDeniedError": (_K.PERMANENT, _E.AUTH),
    "ModelNotFoundError": (_K.PERMANENT, _E.NOT_FOUND),  # a missing model, not subject
    "ModelInvalidRequestError": (_K.MALFORMED_TASK, _E.DATA),
    "ContextOverflowError": (_K.CONTEXT_OVERFLOW, _E.CONTEXT_OVERFLOW),
    "ModelRefusalError": (_K.MALFORMED_TASK, _E.DATA),
    "ModelRateLimitError": (_K.TRANSIENT, _E.RATE_LIMIT),
    "ModelAPIError": (_K.TRANSIENT, _E.UNKNOWN),
    "ModelConnectionError": (_K.TRANSIENT, _E.CONNECTION),
    "ModelTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "OutputParserException": (_K.TRANSIENT, _E.DATA),
    # langchain-core: the rest of its public exceptions
    "SSRFBlockedError": (_K.PERMANENT, _E.AUTH),  # a URL the SSRF policy refuses
    "TracerException": (_K.UNKNOWN, _E.UNKNOWN),
    "IndexingException": (_K.UNKNOWN, _E.UNKNOWN),
    "InvalidKeyException": (_K.UNKNOWN, _E.UNKNOWN),
    "ChevronError": (_K.UNKNOWN, _E.UNKNOWN),  # a broken mustache prompt template
    "FakeListChatModelError": (_K.UNKNOWN, _E.UNKNOWN),  # test doubles out of answers
    "FakeListLLMError": (_K.UNKNOWN, _E.UNKNOWN),
}


def describe_langgraph(exc: BaseException) -> Cause:
    """An exception of ``langgraph`` or ``langchain_core``: a node's idle timeout is
    ``idle``; a generic model error with an HTTP status is refined by it."""
    sdk = type(exc).__module__.partition(".")[0]
    name = nearest(exc, LANGGRAPH_ERRORS)
    if name == "NodeTimeoutError" and getattr(exc, "kind", None) == "idle":
        return Cause(Kind.BUDGET, ErrorType.IDLE, f"{sdk}.{type(exc).__name__}(kind='idle')")
    return (
        by_status(exc, LANGGRAPH_ERRORS, ("ModelError", "LangChainException"), sdk)
        or from_table(exc, LANGGRAPH_ERRORS, sdk)
        or unmapped(exc, sdk)
    )
