"""How a model splits over TP ranks: whole KV-head groups, evenly where they divide.

  n_kv = 3, tp = 2:   rank 0 -> kv heads [0, 1]   (q heads 0..5 at group 3)
                      rank 1 -> kv heads [2]      (q heads 6..8)
  n_kv = 2, tp = 3:   KV heads replicated: rank r holds kv head r * n_kv // tp, and the
                      q heads of that group split among the ranks sharing it.

The MLP's intermediate size splits evenly by columns. A mixture-of-experts model's experts
(and its shared expert) split each expert's intermediate width the same way, in whole units
of 256 columns where the width is a multiple of 256 (so a Q4_K / Q6_K down matrix splits on
its blocks), else of 32 (Q8_0, Q4_0, Q4_1): `shard_of(spec, tp, rank)`.
Pure Python: the planner uses it for per-rank layouts without loading weights.
"""
from __future__ import annotations

from dataclasses import dataclass


def split_even(n: int, parts: int, rank: int) -> tuple[int, int]:
    """[lo, hi) of n items for rank, the first n % parts ranks taking one more."""
    base, extra = divmod(n, parts)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


@dataclass(frozen=True)
class Shard:
    rank: int
    tp: int
    kv_heads: tuple      # global kv-head indices this rank holds
    q_heads: tuple       # global q-head indices this rank computes
    ff: tuple            # [lo, hi) of the intermediate size
    replicated_kv: bool  # tp > n_kv: kv heads are shared by several ranks
    expert_ff: tuple = (0, 0)   # [lo, hi) of each routed expert's intermediate size
    shared_ff: tuple = (0, 0)   # [lo, hi) of the shared expert's

    @property
    def n_kv(self) -> int:
        return len(self.kv_heads)

    @property
    def n_q(self) -> int:
        return len(self.q_heads)


def shard_for(n_heads: int, n_kv: int, d_ff: int, tp: int, rank: int) -> Shard:
    if not 0 <= rank < tp:
        raise ValueError(f"rank {rank} outside TP size {tp}")
    group = n_heads // n_kv
    if tp <= n_kv:
        lo, hi = split_even(n_kv, tp, rank)
        kv = tuple(range(lo, hi))
        q = tuple(h for k in kv for h in range(k * group, (k + 1) * group))
        replicated = False
    else:
        # more ranks than kv heads: each rank takes one kv head (copied), and a share of its q heads
        k = rank * n_kv // tp
        sharing = [r for r in range(tp) if r * n_kv // tp == k]
        idx = sharing.index(rank)
        if len(sharing) > group:
            raise ValueError(f"TP {tp} exceeds the {n_heads} query heads' split over {n_kv} kv heads")
        qlo, qhi = split_even(group, len(sharing), idx)
        kv = (k,)
        q = tuple(range(k * group + qlo, k * group + qhi))
        replicated = True
    ff = split_even(d_ff, tp, rank)
    return Shard(rank, tp, kv, q, ff, replicated)


def ff_unit(width: int) -> int:
    """The columns an expert's width splits in: 256 where it divides (Q4_K, Q6_K blocks), else 32."""
    return 256 if width % 256 == 0 else 32 if width % 32 == 0 else 1


def split_units(width: int, tp: int, rank: int, what: str) -> tuple[int, int]:
    """[lo, hi) of `width` columns for rank, in whole units (ff_unit); every rank gets one."""
    unit = ff_unit(width)
    n = width // unit
    if n < tp:
        raise ValueError(f"TP {tp} exceeds the {what}'s {width} columns in units of {unit} "
                         f"({n} units); run at TP {n} or less")
    lo, hi = split_even(n, tp, rank)
    return lo * unit, hi * unit


def shard_of(spec, tp: int, rank: int) -> Shard:
    """The shard of a ModelSpec: heads and the dense MLP as shard_for, plus the experts'."""
    sh = shard_for(spec.n_heads, spec.n_kv_heads, spec.d_ff, tp, rank)
    if not spec.n_experts:
        return sh
    from dataclasses import replace
    eff = split_units(spec.expert_ff, tp, rank, "routed experts")
    sff = split_units(spec.shared_ff, tp, rank, "shared expert") if spec.n_shared_experts else (0, 0)
    return replace(sh, expert_ff=eff, shared_ff=sff)
