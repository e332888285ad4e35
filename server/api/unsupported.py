"""Fields OpenAI, vLLM or llama-server define that this server does not implement: a 400
naming the field when one asks for a behaviour (a value other than its no-op default),
never a silent 200. Fields nobody defines (`top_a`) are ignored, as OpenAI does, and so
are the knobs that only tune a sampler refused here while it is off (dry_base,
xtc_threshold, mirostat_tau, dynatemp_exponent, repeat_last_n...).
docs/api.md's field table lists every field with what we do.
"""
from __future__ import annotations

from pydantic import model_validator

from .errors import invalid

# field -> (values that ask for nothing, why it is refused)
UNSUPPORTED: dict[str, tuple[tuple, str]] = {
    "suffix": ((None, ""), "no fill-in-the-middle"),
    "prompt_embeds": ((None,), "prompt embeddings are not taken; send text or token ids"),
    "return_token_ids": ((None, False), "token ids are not returned; use /tokenize or logprobs"),
    "image_data": ((None, []), "text is the only input"),
    "multimodal_data": ((None, []), "text is the only input"),
    "n_cmpl": ((None, 1), "send n for several choices"),
    "parse_tool_calls": ((None, True), "replies to a request with tools are always parsed "
                         "for tool calls"),
    "return_progress": ((None, False), "prompt progress is not streamed"),
    "best_of": ((None, 1), "best_of > 1 is not supported; use n"),
    "use_beam_search": ((None, False), "no beam search"),
    "length_penalty": ((None, 1, 1.0), "no beam search"),
    "audio": ((None,), "no audio output"),
    "modalities": ((None, ["text"]), "text is the only modality"),
    "prediction": ((None,), "predicted outputs are not supported"),
    "web_search_options": ((None,), "no web search"),
    "functions": ((None,), "the deprecated `functions` is not supported; send `tools`"),
    "function_call": ((None,), "the deprecated `function_call` is not supported; send "
                      "`tool_choice`"),
    "structural_tag": ((None,), "structural tags are not supported; use tools or a grammar"),
    "logits_processors": ((None, []), "custom logits processors are not supported"),
    "bad_words": ((None, []), "bad_words is not supported; use logit_bias"),
    "allowed_token_ids": ((None,), "allowed_token_ids is not supported; use logit_bias or "
                          "guided_choice"),
    "mirostat": ((None, 0), "mirostat sampling is not supported"),
    "typical_p": ((None, 1, 1.0), "typical sampling is not supported"),
    "tfs_z": ((None, 1, 1.0), "tail-free sampling is not supported"),
    "dynatemp_range": ((None, 0, 0.0), "dynamic temperature is not supported"),
    "top_n_sigma": ((None, -1, 0, -1.0, 0.0), "top-n-sigma sampling is not supported"),
    "xtc_probability": ((None, 0, 0.0), "XTC sampling is not supported"),
    "dry_multiplier": ((None, 0, 0.0), "DRY sampling is not supported"),
    "n_probs": ((None, 0), "n_probs is not supported; use logprobs / top_logprobs"),
    "lora": ((None, []), "no LoRA adapters"),
    "image_url": ((None,), "no image input"),
    "spaces_between_special_tokens": ((None, True), "special tokens are always decoded as "
                                      "HF's decode joins them"),
    "truncate_prompt_tokens": ((None,), "prompts are never truncated; shorten the prompt"),
    "return_tokens_as_token_ids": ((None, False), "tokens are returned as text"),
    "guided_whitespace_pattern": ((None,), "JSON is written with \", \" and \": \" separators"),
    "n_predict": ((None,), "send max_tokens"),
    "repeat_penalty": ((None, 1, 1.0), "send repetition_penalty (applied over the whole "
                       "prompt and reply)"),
    "samplers": ((None,), "the sampler order is fixed (docs/api.md)"),
    "min_keep": ((None, 0), "min_keep is not supported"),
    "n_keep": ((None, 0), "the context is never shifted"),
    "n_indent": ((None, 0), "n_indent is not supported"),
    "t_max_predict_ms": ((None, 0), "no time limit on generation; use max_tokens"),
    "post_sampling_probs": ((None, False), "logprobs are the raw model's"),
    "return_tokens": ((None, False), "tokens are not returned; use logprobs"),
    "response_fields": ((None,), "response_fields is not supported"),
    "grammar_lazy": ((None, False), "lazy grammars are not supported"),
    "grammar_triggers": ((None, []), "lazy grammars are not supported"),
}

# chat only (on /v1/completions `echo` is supported)
CHAT_UNSUPPORTED: dict[str, tuple[tuple, str]] = {
    "echo": ((None, False), "chat echo (repeating the last message) is not supported"),
    "continue_final_message": ((None, False), "continuing the final message is not supported; "
                               "use /v1/completions with the rendered prompt"),
    "documents": ((None, []), "documents (RAG templates) are not supported"),
    "chat_template": ((None,), "a per-request chat template is not supported; start the "
                      "server with --chat-template"),
}


def refuse_unsupported_fields(data, table: dict = UNSUPPORTED) -> None:
    if not isinstance(data, dict):
        return
    for name, value in data.items():
        rule = table.get(name)
        if rule is not None and not any(value == ok and type(value) is type(ok)
                                        or value is ok for ok in rule[0]):
            raise invalid(f"{name} is not supported by this server: {rule[1]}", param=name,
                          code="unsupported_field")


def refused_first(refuse):
    """A pydantic model validator (mode "before", a classmethod) running refuse(data) on the
    raw body before any field is validated, then passing the body on unchanged: refuse raises
    the ApiError (a 400 naming the field, code unsupported_field), never a validation error.
    A model takes it as `_refuse = refused_first(refuse_unserved)`."""
    def _refuse(cls, data):
        refuse(data)
        return data
    return model_validator(mode="before")(classmethod(_refuse))
