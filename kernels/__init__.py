"""One pair per op: a numpy reference and a CUDA form with its cupy launcher.

`kernels/<op>.py` holds `ref(...)` (numpy, float32: the arithmetic the CPU engine runs);
where the op has a GPU form, `kernels/<op>_cuda.py` holds `cuda(...)` (cupy arrays in, cupy
arrays out), its CUDA C in `kernels/csrc/` (`*.cu`, and `*.cuh` for what several share:
common.cuh with bf16, warp reductions, the shared per-element arithmetic and PDL;
pi_order.cuh; the mma steps), composed by `common_cuda.csrc` (files in order, local
includes resolved) and compiled at run time by `common_cuda.kernel` (HEADER in front; for the
device's own SM, or arch "sm_90a" for the wgmma kernels). The model never
calls either form directly: it calls `kernels.ops.<op>(...)`, which picks the form by the
array's type (numpy or cupy).
"""
