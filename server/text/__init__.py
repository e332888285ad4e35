"""The text layer: tokenizer (GGUF or HF folder), chat templates, streamed detokenizing, stop strings."""
from .chat_template import DEFAULT_CHAT_TEMPLATE, ChatTemplateError, render_chat
from .detok import IncrementalDetokenizer
from .stops import StopMatcher, StopSet
from .tokenizer import Tokenizer, TokenizerError

__all__ = ["Tokenizer", "TokenizerError", "render_chat", "ChatTemplateError", "DEFAULT_CHAT_TEMPLATE",
           "IncrementalDetokenizer", "StopMatcher", "StopSet"]
