"""One pair per op: a numpy reference and a CUDA source with its cupy launcher.

Every module here exports `ref(...)` (numpy, float32, the arithmetic the CPU engine runs)
and, where the op has a GPU form, `cuda(...)` (cupy arrays in, cupy arrays out). The
model never calls either directly: it calls `kernels.ops.<op>(xp, ...)`, which picks the
form by array module.
"""
