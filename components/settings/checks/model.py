"""Cross-key rules of the model: parsers and multimodal limits against what vLLM registers and what the model's
family reads."""

from __future__ import annotations

from components.settings.facts import (
    FAMILY_PARSERS,
    GEMMA_4,
    GEMMA_4_WITH_AUDIO,
    VLLM_TOOL_CALL_PARSER_ALIASES,
    VLLM_TOOL_CALL_PARSERS,
    ModelFamily,
)
from components.settings.findings import Finding
from components.settings.root import Settings


def model_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    vllm, family = settings.vllm, settings.family
    registered = ", ".join(sorted(VLLM_TOOL_CALL_PARSERS))
    if not vllm.enable_auto_tool_choice:
        # Only the vm wing runs the smoke test (startup/serve.sh); a gke replica is gated on /health alone.
        reason = ("the serving step's smoke test asks for a tool call (startup/serve.sh), so the deploy would fail "
                  "after the whole cold start; this stack serves tool-calling agents" if settings.platform == "vm"
                  else "this stack serves tool-calling agents, and vLLM refuses every request with tool_choice auto: "
                  "'\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set' "
                  "(vllm/renderers/online_renderer.py, 0.33.0); no smoke test runs on gke, so the deploy would not "
                  "catch it")
        findings.append(Finding(
            "vllm.enableAutoToolChoice", False, reason, "set it true with the model's toolCallParser",
        ))
    elif not vllm.tool_call_parser:
        findings.append(Finding(
            "vllm.toolCallParser", None,
            "enableAutoToolChoice needs a parser (vLLM exits: '--enable-auto-tool-choice requires "
            f"--tool-call-parser'), and none is known for {vllm.model} (a family whose format vLLM registers no parser "
            "for, or a model the catalog does not know)",
            f"set the one its chat template writes, one of {registered}", also_keys=("vllm.model",),
        ))
    for key, parser, own in (("toolCallParser", vllm.tool_call_parser, family and family.tool_call_parser),
                             ("reasoningParser", vllm.reasoning_parser, family and family.reasoning_parser)):
        owner = FAMILY_PARSERS.get(parser) if parser else None
        if owner is not None and owner is not family:
            findings.append(Finding(
                f"vllm.{key}", parser,
                f"it reads only {owner.name} output, and {vllm.model} is not a {owner.name} model (its id does not "
                "say gemma-4)",
                "set the parser for your model's family, or remove the key to follow the model (a Gemma 4 "
                "checkpoint under another name: put gemma-4 in its name)",
                also_keys=("vllm.model",),
            ))
        elif family is not None and parser and own and VLLM_TOOL_CALL_PARSER_ALIASES.get(parser, parser) != own:
            findings.append(Finding(
                f"vllm.{key}", parser, f"{family.name} writes its own format, which only the {own} parser reads",
                f"set it to {own} or remove the key", also_keys=("vllm.model",),
            ))
    if family is not None:
        takes = _family_modalities(vllm.model, family)
        unsupported = sorted(key for key, count in vllm.limit_mm_per_prompt.items() if count > 0 and key not in takes)
        if unsupported:
            findings.append(Finding.warning(
                "vllm.limitMmPerPrompt", vllm.limit_mm_per_prompt,
                f"{vllm.model} takes no {', '.join(unsupported)} (vLLM ignores the limit, and requests with it fail)",
                f"set it to 0; {family.name} here takes {', '.join(sorted(takes))}",
            ))
    return findings


def _family_modalities(model: str, family: ModelFamily) -> frozenset[str]:
    if family is GEMMA_4 and not GEMMA_4_WITH_AUDIO.search(model):
        return family.modalities - {"audio"}
    return family.modalities
