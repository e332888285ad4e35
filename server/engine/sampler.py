"""Choose the next token from one row of logits (host numpy, float32).

Order: penalties on the raw logits, then logit_bias (added), then the masks (eos and
stop tokens before min_tokens; the grammar's allowed tokens), then temperature, top-k,
top-p and min-p, then a draw from the request's own generator (same seed, same reply).
Greedy is the first arg-max of the penalised, biased and masked logits. Logprobs are
those of the raw logits (vLLM's default), whatever bias or mask chose the token.

A stream with logit_bias, min_tokens or a grammar is `shaped`: it is never plain greedy.
On the CPU its token comes from `sample()` here. On GPU rounds every row that is not plain
greedy is drawn on the device (kernels/sample_cuda.py, defined by kernels/sample.py): its
penalties, bias, banned tokens and grammar bitmask go there as `device_inputs()`, with the
same float32 arithmetic as `penalise()` and `shape()` here, and only the logprobs (when
asked) are computed here, from a copy of the raw row (`logprobs()`).
"""
from __future__ import annotations

import secrets

import numpy as np

from server.requests import SamplingParams

# A temperature under this samples greedily (vLLM's _SAMPLING_EPS too): dividing logits by
# 1e-38 overflows float32 to inf, inf - inf is NaN, and the draw would stop the engine.
MIN_TEMPERATURE = 1e-5


class SamplerState:
    """One stream's history for penalties, and its random generator."""

    def __init__(self, params: SamplingParams, prompt_ids, salt: int = 0, *,
                 grammar=None, eos_ids=()):
        self.params = params
        self.prompt = np.asarray(prompt_ids, dtype=np.int64)
        self.counts: dict[int, int] = {}
        self.produced = 0
        self.constraint = grammar.constraint() if grammar is not None else None
        self.end_ids = np.asarray(sorted(set(eos_ids) | set(params.stop_token_ids)), dtype=np.int64)
        self.bias_ids = np.asarray([t for t, _ in params.logit_bias], dtype=np.int64)
        self.bias = np.asarray([b for _, b in params.logit_bias], dtype=np.float32)
        # the API takes seeds in [-2**63, 2**64); numpy's seeds must not be negative, so a
        # seed counts as its 64-bit two's complement (-1 and 2**64 - 1 draw the same)
        seed = params.seed % 2**64 if params.seed is not None else None
        self.rng = np.random.default_rng(None if seed is None else [seed, salt])
        # the GPU's counter-based draw (kernels/sample.py) is keyed by these: the request's
        # seed, or one drawn once for it, and the server's salt
        self.device_seed = seed if seed is not None else secrets.randbits(64)
        self.salt = salt % 2**64
        self._prompt_ids = None              # the prompt's distinct ids, once a device row needs them
        self._device_row = None              # device_inputs()'s fixed part, once asked
        self._adj = None                     # its adjusted tokens, kept up by record()

    @property
    def shaped(self) -> bool:
        """Logits changed by bias or masks: only the host sampler applies those."""
        p = self.params
        return bool(p.logit_bias) or p.min_tokens > 0 or self.constraint is not None

    @property
    def done(self) -> bool:
        """The grammar is complete: the reply ends here."""
        return self.constraint is not None and self.constraint.done

    @property
    def plain_greedy(self) -> bool:
        """Greedy with nothing that reads the logits' values: the arg-max alone decides."""
        p = self.params
        return (p.greedy and p.logprobs is None and p.repetition_penalty == 1.0
                and not p.presence_penalty and not p.frequency_penalty and not self.shaped)

    def device_inputs(self) -> dict:
        """This stream's row of the device sampler (kernels.sample.ref's per-row arguments):
        greedy as temperature 0; adj = kernels.sample.split_adj's pair (token, times generated, flags:
        1 seen (repetition penalty), 2 banned (eos before min_tokens), bias), ids unique;
        mask = the grammar's uint32 words or None; plain = greedy with nothing to shape."""
        p = self.params
        if self._device_row is None:               # what never changes for this stream
            greedy = p.greedy or p.temperature < MIN_TEMPERATURE
            self._device_row = dict(
                temperature=0.0 if greedy else p.temperature, top_k=p.top_k, top_p=p.top_p,
                min_p=p.min_p, seed=self.device_seed, salt=self.salt,
                rep=p.repetition_penalty, pres=p.presence_penalty, freq=p.frequency_penalty,
                plain=self.plain_greedy)
        mask = None
        if self.constraint is not None and not self.constraint.done:
            mask = self.constraint.words()
        if self._adj is None:
            self._adj = _Adjusted(self)
        return {**self._device_row, "adj": self._adj.rows(), "mask": mask}

    def prepare(self) -> None:
        """Work that needs only this stream's past: its grammar's next mask."""
        if self.constraint is not None and not self.constraint.done:
            self.constraint.prepare()

    def record(self, token: int) -> None:
        self.counts[token] = self.counts.get(token, 0) + 1
        self.produced += 1
        if self._adj is not None:
            self._adj.record(token, self.produced)
        if self.constraint is not None:
            self.constraint.consume(token)


class _Adjusted:
    """A stream's adjusted tokens for the device sampler (kernels.sample.split_adj's pair:
    int32 [A, 3] token, times generated, flags; float32 [A] bias), one row a token: the
    prompt's (seen, under a repetition penalty), logit_bias's, the eos / stop ids (banned
    until min_tokens), and each generated token, added or updated as it is recorded (O(1) a
    token, not a rebuild a round)."""

    def __init__(self, st: SamplerState):
        from kernels.sample import BANNED, SEEN
        p = st.params
        self.SEEN, self.BANNED = SEEN, BANNED
        self.rep = p.repetition_penalty != 1.0
        self.pf = bool(p.presence_penalty or p.frequency_penalty)
        self.min_tokens = p.min_tokens
        self.at: dict[int, int] = {}
        self.ai = np.zeros((16, 3), dtype=np.int32)
        self.ab = np.zeros(16, dtype=np.float32)
        self.n = 0
        self.ends = st.end_ids.tolist() if p.min_tokens > 0 else []
        if self.rep:
            u = np.unique(st.prompt)
            self._grow(u.size)
            self.ai[:u.size, 0] = u
            self.ai[:u.size, 2] = SEEN
            self.at = {t: i for i, t in enumerate(u.tolist())}
            self.n = u.size
        for t, b in zip(st.bias_ids.tolist(), st.bias.tolist()):
            i = self._row(t)
            self.ab[i] = np.float32(self.ab[i] + np.float32(b))
        if st.produced < p.min_tokens:
            for t in self.ends:
                i = self._row(t)                      # first: _row may grow self.ai
                self.ai[i, 2] |= BANNED
        for t, c in st.counts.items():
            for _ in range(c):
                self._gen(t)

    def _grow(self, need: int) -> None:
        while self.n + need > len(self.ab):
            self.ai = np.concatenate([self.ai, np.zeros_like(self.ai)])
            self.ab = np.concatenate([self.ab, np.zeros_like(self.ab)])

    def _row(self, t: int) -> int:
        i = self.at.get(t)
        if i is None:
            self._grow(1)
            i = self.at[t] = self.n
            self.ai[i, 0] = t
            self.n += 1
        return i

    def _gen(self, t: int) -> None:
        if self.rep or self.pf:
            i = self._row(t)
            if self.pf:
                self.ai[i, 1] += 1
            if self.rep:
                self.ai[i, 2] |= self.SEEN

    def record(self, t: int, produced: int) -> None:
        self._gen(t)
        if produced == self.min_tokens:               # min_tokens reached: eos allowed again
            for e in self.ends:
                i = self._row(e)
                self.ai[i, 2] &= ~self.BANNED

    def rows(self):
        return (self.ai[:self.n], self.ab[:self.n]) if self.n else ()


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - (m + np.log(np.exp(x - m, dtype=np.float64).sum())).astype(np.float32)


def top_ids(ls: np.ndarray, k: int) -> np.ndarray:
    """The k highest ids of ls, highest first, ties by the lower id: what a stable argsort
    of -ls gives (`np.argsort(-ls, kind="stable")[:k]`), without sorting the whole
    vocabulary (a partition, then the ids at or above the k-th value; 152k ids: ~1 ms, not
    ~12 ms). A row holding NaN takes the argsort itself (its order there is numpy's)."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= ls.size:
        return np.argsort(-ls, kind="stable")
    kth = np.partition(ls, ls.size - k)[ls.size - k]
    if kth != kth:                                    # NaN: numpy's own order
        return np.argsort(-ls, kind="stable")[:k]
    cand = np.flatnonzero(ls >= kth)                  # every id tied with the k-th too
    order = np.lexsort((cand, -ls[cand]))             # by value, then by id
    return cand[order[:k]]


def draw(rng, probs: np.ndarray) -> int:
    """rng.choice(probs.size, p=probs): the same token from the same generator state.
    numpy's choice takes the running sum of p over every id, divides it by its last value
    and finds one rng.random() in it (side "right"); an id of probability 0 adds exactly
    nothing to that sum and is never the one found, so the sum over the others gives the
    same token, without numpy's checks of the whole vocabulary (152k ids: ~1 ms) or its
    zeros after a top-k / top-p cut (tests/model/test_sampler_fast_paths.py holds it to
    rng.choice). A mass that is NaN, infinite or zero goes to rng.choice itself (its
    errors)."""
    nz = np.flatnonzero(probs)
    cdf = np.cumsum(probs if nz.size == probs.size else probs[nz])
    if not (cdf.size and 0.0 < cdf[-1] < np.inf):
        return int(rng.choice(probs.size, p=probs))
    cdf /= cdf[-1]
    i = int(cdf.searchsorted(rng.random(), side="right"))
    return int(nz[i]) if nz.size != probs.size else i


def top_p_keep(probs: np.ndarray, top_p: float) -> np.ndarray:
    """The 0/1 float mask of the fewest most likely ids whose mass reaches top_p of the
    whole, exactly as the definition computes it: order = np.argsort(-probs, kind="stable"),
    cum = np.cumsum(probs[order]), cut = searchsorted(cum, top_p * cum[-1]) + 1, ones at
    order[:cut] - without the stable arg-sort of the vocabulary (152k ids: ~17 ms here).

    cum is a running sum of the values in descending order: equal values are equal floats
    whatever their ids, so sorted values give the same cum, and order[:cut] is every id
    above the cut's value and the lowest ids equal to it. Its prefix needs only the largest
    values sorted (a partition, then a sort of those); its total cum[-1] needs them all in
    order, but it lies within a few ulps of any other sum of the same values (|error| <=
    n u S for n positive terms summed in any order: 2e-11 of S at 152k ids), so where the
    prefix crosses top_p times every total in that band at the same place, that place is
    the cut; ids of probability 0 (after top-k or min-p) are left out of the partition:
    they add nothing and come last. Otherwise (a prefix sum within the band, or the top values do not reach it)
    the whole row is sorted, and a row holding NaN takes the definition as written."""
    n = probs.size
    mask = np.zeros_like(probs)
    total = float(probs.sum())
    if not 0.0 < total < np.inf:                      # NaN, inf or no mass: as written
        order = np.argsort(-probs, kind="stable")
        cum = np.cumsum(probs[order])
        mask[order[:int(np.searchsorted(cum, top_p * cum[-1])) + 1]] = 1.0
        return mask
    # zeros (a top-k or min-p cut) come last in descending order and add exactly nothing
    # to the running sum: the cut lies among the others, which alone are partitioned
    vals = probs[probs > 0.0]
    m = vals.size
    band = total * 1e-9                               # >> n u S for any n numpy holds here
    lo, hi = top_p * (total - band), top_p * (total + band)
    cut = None
    need = lo / vals.max()                            # ids the cut takes at the least
    for k in (4096, 32768):
        if k >= m:
            break
        if need >= k:                                 # a flat row: its k largest fall short
            continue
        desc = np.partition(vals, m - k)[m - k:]      # the k largest values
        desc = np.sort(desc)[::-1]
        cum = np.cumsum(desc)
        a, b = int(np.searchsorted(cum, lo)), int(np.searchsorted(cum, hi))
        if b < k and a == b:                          # the cut, whatever the exact total
            cut = a + 1
            break
        if b < k:                                     # a prefix sum within the band
            break
    if cut is None:                                   # the whole row, in order
        desc = np.sort(vals)[::-1]
        cum = np.cumsum(desc)
        cut = int(np.searchsorted(cum, top_p * cum[-1])) + 1
    if cut >= n:
        mask[:] = 1.0
        return mask
    v = desc[cut - 1]
    above = probs > v
    mask[above] = 1.0
    mask[np.flatnonzero(probs == v)[:cut - int(np.count_nonzero(above))]] = 1.0
    return mask


def penalise(logits: np.ndarray, st: SamplerState) -> np.ndarray:
    p = st.params
    if p.repetition_penalty != 1.0:
        seen = np.unique(np.concatenate([st.prompt, np.fromiter(st.counts, dtype=np.int64)]))
        v = logits[seen]
        logits[seen] = np.where(v > 0, v / p.repetition_penalty, v * p.repetition_penalty)
    if st.counts and (p.presence_penalty or p.frequency_penalty):
        ids = np.fromiter(st.counts.keys(), dtype=np.int64)
        cnt = np.fromiter(st.counts.values(), dtype=np.float32)
        logits[ids] -= p.frequency_penalty * cnt + p.presence_penalty
    return logits


class NonFiniteLogits(FloatingPointError):
    """A row of logits holding NaN or +inf: no token can be drawn from it. The scheduler
    ends that request alone with this message; the round goes on."""


def check_finite(logits: np.ndarray) -> None:
    # -inf is a legal mask; NaN and +inf turn every probability into NaN. One pass: the
    # max is NaN where any value is (numpy's max propagates it), +inf where one is
    if not logits.max() < np.inf:
        bad = int(np.isnan(logits).sum() + np.isposinf(logits).sum())
        raise NonFiniteLogits(f"{bad} of this request's {logits.size} logits are NaN or "
                              "infinite; no token can be drawn (a numerical fault)")


def shape(logits: np.ndarray, st: SamplerState) -> np.ndarray:
    """logit_bias, then the min_tokens and grammar masks (-inf), in place."""
    if st.bias_ids.size:
        ok = st.bias_ids < logits.size
        np.add.at(logits, st.bias_ids[ok], st.bias[ok])
    if st.produced < st.params.min_tokens and st.end_ids.size:
        logits[st.end_ids[st.end_ids < logits.size]] = -np.inf
    if st.constraint is not None:
        logits[~st.constraint.allowed(logits.size)] = -np.inf
    if st.shaped and not np.isfinite(logits).any():
        raise ValueError("no token is allowed: logit_bias, min_tokens and the grammar "
                         "leave nothing to sample")
    return logits


def logprobs(row: np.ndarray, st: SamplerState, tok: int):
    """-> (logprob of tok, top logprobs) of raw logits `row`, or (None, ()) if not asked."""
    p = st.params
    if p.logprobs is None:
        return None, ()
    ls = _log_softmax(np.asarray(row, dtype=np.float32))
    n = max(0, int(p.logprobs))
    top = ()
    if n:
        top = tuple((int(i), float(ls[i])) for i in top_ids(ls, n))
    return float(ls[tok]), top


def device_token(tok: int, st: SamplerState) -> int:
    """A token the device sampler drew for st, or the host sampler's error for its codes."""
    if tok == -2:
        raise NonFiniteLogits("this request's logits hold NaN or +inf after its penalties "
                              "and bias; no token can be drawn (a numerical fault)")
    if tok == -1:
        raise ValueError("no token is allowed: logit_bias, min_tokens and the grammar "
                         "leave nothing to sample")
    if tok == -4 and getattr(st, "device_error", None) is not None:
        raise st.device_error
    if tok < 0:
        raise RuntimeError(f"the device sampler failed on this row (code {tok})")
    return tok


def sample(row: np.ndarray, st: SamplerState):
    """-> (token, logprob of it, top logprobs [(id, lp)]) from raw logits `row` [vocab]."""
    p = st.params
    raw = np.asarray(row, dtype=np.float32)
    # a copy only where something writes into the row (penalties, bias, masks): the raw
    # row stays the logprobs' source
    edits = st.shaped or p.repetition_penalty != 1.0 or (
        st.counts and (p.presence_penalty or p.frequency_penalty))
    logits = penalise(raw.copy(), st) if edits else raw
    if st.shaped:
        logits = shape(logits, st)
    check_finite(logits)
    if p.greedy or p.temperature < MIN_TEMPERATURE:
        tok = int(np.argmax(logits))
    else:
        z = logits / np.float32(p.temperature)
        if p.top_k and p.top_k < z.size:            # (no top-k: z as it is, not a copy)
            kth = np.partition(z, -p.top_k)[-p.top_k]
            z = np.where(z >= kth, z, -np.inf)
        probs = np.exp(z - z.max(), dtype=np.float64)
        probs /= probs.sum()
        if p.min_p > 0:
            probs = np.where(probs >= p.min_p * probs.max(), probs, 0.0)
        if p.top_p < 1.0:
            probs = probs * top_p_keep(probs, p.top_p)
        probs /= probs.sum()
        tok = draw(st.rng, probs)
    st.record(tok)
    lp = top = None
    if p.logprobs is not None:
        ls = _log_softmax(raw)
        lp = float(ls[tok])
        n = max(0, int(p.logprobs))
        if n:
            top = tuple((int(i), float(ls[i])) for i in top_ids(ls, n))
    return tok, lp, top or ()


def prepare_masks(states) -> None:
    """`prepare` for a round's constrained streams at once (grammar.prepare_many: the same
    masks, on llguidance's threads)."""
    from server.engine.grammar import Constraint, prepare_many
    live = [s.constraint for s in states if s.constraint is not None and not s.constraint.done]
    prepare_many([c for c in live if isinstance(c, Constraint)])
    for c in live:
        if not isinstance(c, Constraint):
            c.prepare()
