"""foldserve: a multi-rank LLM serving daemon."""
__version__ = "0.1.0"

import os as _os

# One BLAS thread unless told otherwise: on small machines OpenBLAS's threads cost more than
# they give for the row tiles the engine multiplies (kernels/matmul.py), and several CPU
# ranks on one host would fight over the cores. Set before numpy loads its BLAS.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
