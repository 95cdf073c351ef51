"""The OpenAI Agents SDK's exceptions (``agents``: ``agents.exceptions``, the
sandbox's ``agents.sandbox.errors``, its test doubles' script errors).

A test walks the installed framework's exception classes and fails on one
that is not mapped here, so a new release cannot slip past. The framework is
never imported: classes are recognised by module and class name. Provider
errors are not the SDK's: the ``openai`` SDK's own propagate unwrapped (see
``_openai``).

Two are refined. A tool's exception that the SDK does not turn into text for
the model reaches the caller wrapped, as ``UserError("Error running tool NAME:
…")`` with the tool's exception as ``__cause__``: the cause is what failed, and
:func:`wrapped_by_openai_agents` hands it to ``describe`` (which may need
another SDK's table for it). A sandbox command that exited 127 was not found
(rule 7).
"""

from __future__ import annotations

from lyra._taxonomy import ErrorType
from lyra.delegation._foreign._cause import Cause, Kind, from_table, unmapped

_K, _E = Kind, ErrorType

OPENAI_AGENTS_ERRORS: dict[str, tuple[Kind, ErrorType]] = {
    "AgentsException": (_K.UNKNOWN, _E.UNKNOWN),
    # The SDK's own turn limit: rule 1 (timeout / budget), never a success.
    "MaxTurnsExceeded": (_K.BUDGET, _E.BUDGET),
    # Malformed model output (a bad tool call, invalid JSON): another try may differ.
    "ModelBehaviorError": (_K.TRANSIENT, _E.DATA),
    "ModelRefusalError": (_K.MALFORMED_TASK, _E.DATA),
    "ModelTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "ToolTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "MCPToolCancellationError": (_K.TRANSIENT, _E.UNKNOWN),
    "InputGuardrailTripwireTriggered": (_K.MALFORMED_TASK, _E.DATA),
    "OutputGuardrailTripwireTriggered": (_K.MALFORMED_TASK, _E.DATA),
    "ToolInputGuardrailTripwireTriggered": (_K.MALFORMED_TASK, _E.DATA),
    "ToolOutputGuardrailTripwireTriggered": (_K.MALFORMED_TASK, _E.DATA),
    # Misuse of the SDK (refined by its cause when it wraps a tool's exception).
    "UserError": (_K.PERMANENT, _E.UNKNOWN),
    "ResponsesWebSocketError": (_K.TRANSIENT, _E.CONNECTION),
    "STTWebsocketConnectionError": (_K.TRANSIENT, _E.CONNECTION),
    # agents.sandbox.errors
    "SandboxError": (_K.UNKNOWN, _E.UNKNOWN),
    "ConfigurationError": (_K.PERMANENT, _E.UNKNOWN),
    "InvalidManifestPathError": (_K.PERMANENT, _E.UNKNOWN),
    "InvalidCompressionSchemeError": (_K.PERMANENT, _E.UNKNOWN),
    "SkillsConfigError": (_K.PERMANENT, _E.UNKNOWN),
    # ConfigurationErrors in the SDK, but the patch is the model's output, not config.
    "ApplyPatchError": (_K.TRANSIENT, _E.DATA),
    "ApplyPatchPathError": (_K.TRANSIENT, _E.DATA),
    "ApplyPatchDiffError": (_K.TRANSIENT, _E.DATA),
    "ApplyPatchFileNotFoundError": (_K.TRANSIENT, _E.DATA),
    "ApplyPatchDecodeError": (_K.UNKNOWN, _E.DATA),
    "SandboxRuntimeError": (_K.TRANSIENT, _E.UNKNOWN),
    "ExposedPortUnavailableError": (_K.PERMANENT, _E.UNKNOWN),
    "ExecFailureError": (_K.UNKNOWN, _E.UNKNOWN),
    "ExecNonZeroError": (_K.UNKNOWN, _E.UNKNOWN),  # exit 127: rule 7
    "ExecTimeoutError": (_K.TRANSIENT, _E.TIMEOUT),
    "ExecTransportError": (_K.TRANSIENT, _E.CONNECTION),
    "PtySessionNotFoundError": (_K.UNKNOWN, _E.UNKNOWN),
    "WorkspaceIOError": (_K.TRANSIENT, _E.UNKNOWN),
    "WorkspaceReadNotFoundError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "WorkspaceArchiveReadError": (_K.TRANSIENT, _E.UNKNOWN),
    "WorkspaceArchiveWriteError": (_K.TRANSIENT, _E.UNKNOWN),
    "WorkspaceWriteTypeError": (_K.UNKNOWN, _E.DATA),
    "WorkspaceStartError": (_K.TRANSIENT, _E.UNKNOWN),
    "WorkspaceStopError": (_K.TRANSIENT, _E.UNKNOWN),
    "WorkspaceRootNotFoundError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "ArtifactError": (_K.UNKNOWN, _E.UNKNOWN),
    "LocalArtifactError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "LocalFileReadError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "LocalDirReadError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "LocalChecksumError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "GitArtifactError": (_K.UNKNOWN, _E.UNKNOWN),
    "GitMissingInImageError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "GitCloneError": (_K.TRANSIENT, _E.CONNECTION),
    "GitSubpathError": (_K.PERMANENT, _E.UNKNOWN),
    "GitCopyError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "MountArtifactError": (_K.UNKNOWN, _E.UNKNOWN),
    "MountToolMissingError": (_K.ENVIRONMENT, _E.UNKNOWN),
    "MountConfigError": (_K.PERMANENT, _E.UNKNOWN),
    "MountCommandError": (_K.UNKNOWN, _E.UNKNOWN),
    "SnapshotError": (_K.TRANSIENT, _E.UNKNOWN),
    "SnapshotPersistError": (_K.TRANSIENT, _E.UNKNOWN),
    "SnapshotRestoreError": (_K.TRANSIENT, _E.UNKNOWN),
    "SnapshotNotRestorableError": (_K.PERMANENT, _E.UNKNOWN),
    "ArchiveResourceLimitError": (_K.PERMANENT, _E.DATA),
    "UnsafeZipMemberError": (_K.PERMANENT, _E.DATA),
    "UnsafeTarMemberError": (_K.PERMANENT, _E.DATA),
    "DependenciesError": (_K.PERMANENT, _E.UNKNOWN),
    "DependenciesBindingError": (_K.PERMANENT, _E.UNKNOWN),
    "DependenciesMissingDependencyError": (_K.PERMANENT, _E.UNKNOWN),
    # agents.testing, agents.realtime.testing, agents.voice.testing (importable with
    # numpy): a test double's script went wrong.
    "ModelScriptError": (_K.UNKNOWN, _E.UNKNOWN),
    "InvalidModelStep": (_K.UNKNOWN, _E.UNKNOWN),
    "UnconsumedModelSteps": (_K.UNKNOWN, _E.UNKNOWN),
    "UnexpectedModelCall": (_K.UNKNOWN, _E.UNKNOWN),
    "SandboxScriptError": (_K.UNKNOWN, _E.UNKNOWN),
    "InvalidSandboxStep": (_K.UNKNOWN, _E.UNKNOWN),
    "SandboxCallMatcherError": (_K.UNKNOWN, _E.UNKNOWN),
    "UnconsumedSandboxSteps": (_K.UNKNOWN, _E.UNKNOWN),
    "UnexpectedSandboxCall": (_K.UNKNOWN, _E.UNKNOWN),
    "RealtimeScriptError": (_K.UNKNOWN, _E.UNKNOWN),
    "UnconsumedRealtimeSteps": (_K.UNKNOWN, _E.UNKNOWN),
    "UnexpectedRealtimeSend": (_K.UNKNOWN, _E.UNKNOWN),
    "VoiceScriptError": (_K.UNKNOWN, _E.UNKNOWN),
    "UnconsumedVoiceSteps": (_K.UNKNOWN, _E.UNKNOWN),
    "UnexpectedVoiceCall": (_K.UNKNOWN, _E.UNKNOWN),
}


_INVALID_OUTPUT = ("Invalid JSON", "Expected a dict", "Could not find key")
"""How the SDK's check of the final output against the agent's output type fails."""


def wrapped_by_openai_agents(exc: BaseException) -> BaseException | None:
    """The tool exception a ``UserError("Error running tool NAME: …")`` carries."""
    if type(exc).__name__ == "UserError" and str(exc).startswith("Error running tool "):
        return exc.__cause__
    return None


_CUT_OFF = ("reason='max_output_tokens'", "finish_reason='length'")
"""How the SDK's errors say the output limit cut a response off (the Responses API's
incomplete response; a Chat Completions answer cut before its first word)."""


_FILTERED = "reason='content_filter'"
"""How the SDK's error says the Responses API withheld a response (its content filter)."""


def describe_openai_agents(exc: BaseException) -> Cause:
    """An exception of ``agents`` (a wrapped tool exception never reaches here)."""
    name = type(exc).__name__
    if name == "ExecNonZeroError" and getattr(exc, "exit_code", None) == 127:
        return Cause(_K.ENVIRONMENT, _E.UNKNOWN, "agents.ExecNonZeroError (exit 127: not found)")
    if name == "ModelBehaviorError" and str(exc).startswith(_INVALID_OUTPUT):
        return Cause(_K.OUTPUT_INVALID, _E.VERIFICATION, "agents.ModelBehaviorError (output type)")
    if name == "ModelBehaviorError" and any(said in str(exc) for said in _CUT_OFF):
        return Cause(_K.INCOMPLETE, _E.DATA, "agents.ModelBehaviorError (the output limit)")
    if name == "ModelBehaviorError" and _FILTERED in str(exc):  # the task, not a fluke
        return Cause(_K.MALFORMED_TASK, _E.DATA, "agents.ModelBehaviorError (content filter)")
    return from_table(exc, OPENAI_AGENTS_ERRORS, "agents") or unmapped(exc, "agents")
