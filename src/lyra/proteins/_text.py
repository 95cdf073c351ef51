"""The protein workload's own templates (briefs, prompts, the analysis text)."""

from __future__ import annotations

from lyra.templates import Templates

TEMPLATES = Templates("lyra.proteins")
render = TEMPLATES.render
