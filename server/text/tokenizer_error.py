"""The tokenizer's one error type: a vocabulary or tokenizer file it cannot use (the file and the
field named). Its own module so tokenizer.py and spm.py both import it without a circle."""


class TokenizerError(ValueError):
    pass
