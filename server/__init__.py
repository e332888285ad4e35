"""foldserve: a multi-rank LLM serving daemon."""
__version__ = "0.1.0"
