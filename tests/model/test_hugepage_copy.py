"""kernels/blocks.hugepage_copy: the LM head's bytes on 2 MiB pages are the same bytes."""
import numpy as np

from kernels.blocks import HUGE, hugepage_copy


def test_the_copy_holds_the_same_bytes_on_a_2_mib_boundary():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (1000, 3400), dtype=np.uint8)        # 3.4 MB
    c = hugepage_copy(a)
    assert c is not a and c.shape == a.shape and c.dtype == a.dtype
    assert c.flags.c_contiguous and c.flags.writeable
    assert c.ctypes.data % HUGE == 0
    assert np.array_equal(c, a)
    a[0, 0] ^= 1                                   # a copy, not a view
    assert c[0, 0] != a[0, 0]


def test_small_arrays_are_left_as_they_are():
    a = np.arange(100, dtype=np.uint8)
    assert hugepage_copy(a) is a
