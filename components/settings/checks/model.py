"""Cross-key rules of the model: parsers and multimodal limits against its family."""

from __future__ import annotations

from components.settings.facts import (
    FAMILY_PARSERS,
    GEMMA_4,
    GEMMA_4_WITH_AUDIO,
    NAMESPACE,
    VLLM_TOOL_CALL_PARSERS,
    ModelFamily,
)
from components.settings.root import Settings


def _model_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Parsers and multimodal limits against what vLLM registers and what the model family reads."""
    errors: list[str] = []
    vllm, family = settings.vllm, settings.family
    registered = ", ".join(sorted(VLLM_TOOL_CALL_PARSERS))
    if not vllm.enable_auto_tool_choice:
        errors.append(
            f"{NAMESPACE}:vllm.enableAutoToolChoice = false: the serving step's smoke test asks "
            "for a tool call (startup/serve.sh), so the deploy would fail after the whole cold "
            "start; this stack serves tool-calling agents: set it true with the model's "
            "toolCallParser"
        )
    elif not vllm.tool_call_parser:
        errors.append(
            f"{NAMESPACE}:vllm.toolCallParser = null: enableAutoToolChoice needs a parser (vLLM "
            "exits: '--enable-auto-tool-choice requires --tool-call-parser'), and no model family "
            f"is known for {vllm.model}; set the one its chat template writes, one of {registered}"
        )
    for key, parser, own in (("toolCallParser", vllm.tool_call_parser, family and family.tool_call_parser),
                             ("reasoningParser", vllm.reasoning_parser, family and family.reasoning_parser)):
        owner = FAMILY_PARSERS.get(parser) if parser else None
        if owner is not None and owner is not family:
            errors.append(
                f"{NAMESPACE}:vllm.{key} = {parser!r}: it reads only {owner.name} output, and "
                f"{vllm.model} is not a {owner.name} model (its id does not say gemma-4); set the "
                "parser for your model's family, or remove the key to follow the model (a Gemma 4 "
                "checkpoint under another name: put gemma-4 in its name)"
            )
        elif family is not None and parser and own and parser != own:
            errors.append(
                f"{NAMESPACE}:vllm.{key} = {parser!r}: {family.name} writes its own format, which "
                f"only the {own} parser reads; set it to {own} or remove the key"
            )
    if family is not None:
        unsupported = sorted(key for key, count in vllm.limit_mm_per_prompt.items()
                             if count > 0 and key not in _family_modalities(vllm.model, family))
        if unsupported:
            warnings.append(
                f"vllm.limitMmPerPrompt: {vllm.model} takes no {', '.join(unsupported)} (vLLM "
                f"ignores the limit, and requests with it fail); {family.name} here takes "
                f"{', '.join(sorted(_family_modalities(vllm.model, family)))}"
            )
    return errors


def _family_modalities(model: str, family: ModelFamily) -> frozenset[str]:
    if family is GEMMA_4 and not GEMMA_4_WITH_AUDIO.search(model):
        return family.modalities - {"audio"}
    return family.modalities
