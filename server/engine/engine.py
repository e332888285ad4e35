"""A rank's data plane: weights on its shard, its KV store, and `apply(step)`, the one
entry point through which every rank (rank 0 and the followers alike) runs Steps."""
from __future__ import annotations

import hashlib
import logging

import numpy as np

import kernels
from kernels import rope
from server.engine.kvstore import KVStore
from server.engine.logits import DeviceLogits
from server.engine.model import Model
from server.engine.rows import RoundChunk
from server.engine.prepare import shard_weights
from server.shapes.kv_layout import kv_spec
from server.shapes.shard import shard_of
from server.ranks.rank_errors import RankMismatch
from kernels.blocks import Blocks, MixedBlocks
from server.ranks.steps import (BeginStep, CopyStep, EndStep, MtpStep, PoolStep, RoundStep, SnapStep,
                                StopStep, EVERY_ROW)

log = logging.getLogger("foldserve")


def cpu_reads_blocks() -> tuple[bool, str]:
    """(whether the CPU forward reads Blocks as stored, else why they are dequantized)."""
    from kernels import qmatmul
    ok, why = qmatmul.available()
    return ok, "" if ok else f"on the CPU: {why}; numpy reads float32 only"


def array_module(device: str):
    if device == "cpu":
        return np
    import cupy
    return cupy


class Engine:
    def __init__(self, spec, get_tensor, *, tp=1, rank=0, device="cpu", all_reduce=None,
                 kv_dtype=None, weight_dtype=None):
        kernels.init()         # idempotent: where the caller (a bench, a test) has not yet
        self.spec, self.tp, self.rank, self.device = spec, tp, rank, device
        self.xp = array_module(device)
        if spec.moe and device != "cpu":
            from server.shapes.spec import UnsupportedModel, moe_on_gpu
            raise UnsupportedModel(moe_on_gpu(spec))
        self.shard = shard_of(spec, tp, rank)
        if device == "cpu":
            self.kv_dtype = kv_dtype or np.float32
            def to_dev(a):
                if isinstance(a, MixedBlocks):
                    return a.merged()
                return a if isinstance(a, Blocks) else np.ascontiguousarray(a, dtype=np.float32)
            keep, why = cpu_reads_blocks, ""          # asked at the first Blocks only
        else:
            # cupy 14.2 has no cupy.bfloat16 (checked on the H200): bf16 is ml_dtypes' type,
            # converted by our own kernel (round to nearest even)
            from kernels.common_cuda import BF16, as_bf16
            self.kv_dtype = kv_dtype or BF16
            xp = self.xp
            from kernels import qmatmul_cuda as Q

            def to_dev(a):            # GGUF blocks stay as stored (kernels/qmatmul_cuda)
                # a kind the GPU kernels do not read (Q5_0, MXFP4, NVFP4) goes up as float
                # (bf16), as the loader gave such matrices before the CPU read them as stored
                if isinstance(a, MixedBlocks) and any(p.kind not in Q.KIND_ID for p in a):
                    a = np.concatenate([p.dequantize() for p in a], axis=0)
                elif isinstance(a, Blocks) and a.kind not in Q.KIND_ID:
                    a = a.dequantize()
                if isinstance(a, Blocks):
                    return Q.upload(a)
                if isinstance(a, MixedBlocks):
                    return Q.stack([Q.upload(p) for p in a])
                return as_bf16(xp.ascontiguousarray(xp.asarray(a, dtype=xp.float32)))
            keep, why = True, ""
        # mixed: a fused matrix of mixed kinds (Q4_K_M's q|k|v) kept as its parts' blocks; on the
        # CPU for the op-by-op MoE families (ops.linear, a product a part), the llama family's
        # fused round still takes it dequantized (its bytes unchanged)
        self.weights = shard_weights(spec, get_tensor, self.shard, to_dev, out_in=device != "cpu",
                                     keep_blocks=keep, why=why, mixed=device != "cpu" or spec.moe)
        if device != "cpu":                   # the weights as held (GGUF blocks as stored)
            from server.engine.prepare import describe_weight_bytes
            log.info("rank %d weights on the device: %s", rank, describe_weight_bytes(self.weights))
        inv = rope.yarn_inv_freq(spec.rot, spec.rope_theta, *spec.rope_yarn)[0] if spec.rope_yarn \
            else rope.inv_freq(spec.rot, spec.rope_theta, spec.rope_scaling)
        self.model = Model(spec, self.weights, inv if device == "cpu" else self.xp.asarray(inv),
                           self.xp, all_reduce)
        self.kv: KVStore | None = None
        self.tables: dict[int, tuple] = {}
        # recurrent families: the position each open stream's fixed part (state) stands at
        # (None: begun on a kept prefix, waiting for its snapshot), and the snapshot slot its
        # page-boundary states go to (SnapStep.PENDING)
        self.fixed_at: dict[int, int | None] = {}
        self.pending: dict[int, int] = {}
        # drafts on a recurrent family: each stream's fixed part as it stood before its last
        # verify chunk, (position, [arrays]): a chunk that starts there again (a replay after
        # refused drafts) restores it first (round(); server/round_build.py); dropped at the
        # stream's next chunk that is not a verify chunk. Not in the plan's bytes: one fixed
        # part a verifying stream (75 MiB for Qwen3-Next-80B), a gap noted in the receipt
        self.fixed_kept: dict[int, tuple] = {}
        # --draft mtp: each stream's trunk rows kept while its MTP pass is deferred (a full
        # round, MtpChunk.defer): [position of the first, [rows arrays]] (server/engine/mtp_pass.py)
        self.mtp_kept: dict[int, list] = {}
        self.pool: PoolStep | None = None
        # every table this rank mapped, chained: equal on every rank when followers map the
        # ids rank 0 names (logged at StopStep, compared by the multi-rank tests)
        self.table_digest = hashlib.sha256()
        self.tables_mapped = 0

    @property
    def kv_spec(self):
        """This shard's KV layout (server/shapes/kv_layout.py): the planner's too."""
        return kv_spec(self.spec, self.shard)

    # bytes of one token's KV rows on this shard, all layers
    @property
    def bytes_per_token(self) -> int:
        return self.kv_spec.bytes_per_token(np.dtype(self.kv_dtype).itemsize)

    def page_bytes(self, page_rows: int) -> int:
        return self.bytes_per_token * page_rows

    def apply(self, step):
        """Run one Step. Returns logits (float32 numpy, one row per chunk that asked) for a
        RoundStep, else None."""
        if isinstance(step, RoundStep):
            return self.round(step)
        if isinstance(step, MtpStep):          # the MTP layer's rows and drafts (--draft mtp)
            from server.engine import mtp_pass
            return mtp_pass.run(self, step)
        if isinstance(step, BeginStep):
            self.tables[step.stream] = step.page_ids
            self.mtp_kept.pop(step.stream, None)
            self.tables_mapped += 1
            self.table_digest.update(repr((step.stream, step.page_ids, step.kept)).encode())
            if self.pool.poison:
                self.kv.poison(step.stream, step.page_ids, step.kept)
            if self.kv.fixed:                  # a stream starts from a zero state (after poison)
                self.kv.reset_fixed(step.stream)
                # on a kept prefix the state must come from a snapshot (SnapStep.RESTORE)
                self.fixed_at[step.stream] = None if step.kept else 0
                self.pending.pop(step.stream, None)
                self.fixed_kept.pop(step.stream, None)
        elif isinstance(step, SnapStep):
            self.snap(step)
        elif isinstance(step, EndStep):
            self.tables.pop(step.stream, None)
            self.mtp_kept.pop(step.stream, None)
            self.fixed_at.pop(step.stream, None)
            self.pending.pop(step.stream, None)
            self.fixed_kept.pop(step.stream, None)
        elif isinstance(step, PoolStep):
            self.make_pool(step)
        elif isinstance(step, CopyStep):
            self.kv.copy_window_pages(step.stream, step.page_ids, step.rows, step.to_pages)
        elif isinstance(step, StopStep):
            log.info("%s", self.table_report())
            if getattr(self.model, "graphs", None) is not None:
                self.model.graphs.release()     # before the communicator closes (graphs.py)
        else:
            raise TypeError(f"not a step: {step!r}")
        return None

    def table_report(self) -> str:
        return (f"rank {self.rank}: {self.tables_mapped} tables mapped, digest "
                f"{self.table_digest.hexdigest()[:16]}, {len(self.tables)} open")

    def make_pool(self, step: PoolStep) -> None:
        mine = self.page_bytes(step.page_rows)
        said = step.page_bytes[self.rank] if self.rank < len(step.page_bytes) else None
        if said != mine:
            raise RankMismatch(
                f"rank {self.rank}: the pool step says {said} bytes a page for this shard, "
                f"this rank's shard needs {mine}; every rank must run the same model and settings")
        self.kv = KVStore.of(self.xp, self.kv_spec, self.kv_dtype, paged=step.paged,
                             pages=step.pages, page_rows=step.page_rows, streams=step.streams,
                             context=step.context, cache_pages=0 if step.paged else step.pages,
                             verify=step.verify, snaps=step.snaps)
        self.pool = step
        log.info("rank %d: KV store %.1f MiB (%s, %d pages of %d rows, %d streams)", self.rank,
                 self.kv.nbytes / 2**20, "pages" if step.paged else "windows", step.pages,
                 step.page_rows, step.streams)

    def snap(self, step: SnapStep) -> None:
        """A snapshot slot's step (server/ranks/steps.SnapStep): the same on every rank, each
        over its own heads' states."""
        name = self.spec.name or self.spec.arch
        n = self.kv.n_snaps
        for s in (step.slot, step.to) if step.op == SnapStep.COPY else (step.slot,):
            if not (0 <= s < n or (s == -1 and step.op == SnapStep.PENDING)):
                raise ValueError(f"{name}: snapshot slot {s} outside the store's {n} slots")
        if step.op == SnapStep.PENDING:
            if step.stream not in self.fixed_at:
                raise ValueError(f"{name}: a pending snapshot slot for stream {step.stream}, "
                                 "which is not open")
            if step.slot < 0:
                self.pending.pop(step.stream, None)
            else:
                self.pending[step.stream] = step.slot
        elif step.op == SnapStep.RESTORE:
            if step.stream not in self.fixed_at:
                raise ValueError(f"{name}: a snapshot restored into stream {step.stream}, "
                                 "which is not open")
            kpool = getattr(self.spec, "index_kpool", 0)
            if self.kv.index_rings and kpool and step.at % kpool:
                raise ValueError(f"{name}: a snapshot restored at position {step.at}, not an "
                                 f"index pool boundary (index_kpool {kpool}): the slots keep "
                                 "no index rings, which are empty only there")
            self.kv.restore(step.stream, step.slot)
            self.fixed_at[step.stream] = step.at
        elif step.op == SnapStep.COPY:
            self.kv.copy_snap(step.slot, step.to)
        else:
            raise ValueError(f"unknown snapshot step op {step.op}")

    def _snap_at(self, stream: int, start: int, n: int) -> tuple:
        """(slot, k) where this chunk's state crosses its last page boundary b (start <= b <
        start + n, b > 0, k = b - start) and the stream has a pending slot; else ()."""
        slot = self.pending.get(stream, -1)
        if slot < 0 or n < 1:
            return ()
        P = self.pool.page_rows
        b = (start + n - 1) // P * P
        return (slot, b - start) if b >= start and b > 0 else ()

    def _roll_back(self, stream: int) -> None:
        """Drafts refused on a recurrent family (replay): the stream's fixed part := its copy
        from before its last verify chunk, standing at that chunk's start again; the chunk
        that asks for it re-feeds the accepted rows (their KV rows rewritten with the same
        bytes: a chunk of n positions and n single ones compute alike, kernels/gdn_cpu.py)."""
        at, arrays = self.fixed_kept.pop(stream)
        if self.kv.index_rings:
            raise ValueError(f"{self.spec.name or self.spec.arch}: stream {stream}: a replay "
                             "over index rings is not supported (no drafts on this family)")
        for a, kept in zip(self.kv.fixed, arrays):
            a[:, stream] = kept
        self.fixed_at[stream] = at

    def round(self, step: RoundStep):
        chunks = []
        for c in step.chunks:
            table, prow = self.kv.address(c.stream, self.tables[c.stream])
            ring = self.kv.ring_table(c.stream, c.start + len(c.tokens))
            chunks.append(RoundChunk(table, prow, c.start, c.tokens, c.logits, ring, c.stream,
                                     self._snap_at(c.stream, c.start, len(c.tokens))
                                     if self.pending else ()))
        if self.kv.fixed:              # a state stands at one position: chunks must follow it
            for c in step.chunks:
                at = self.fixed_at.get(c.stream, -1)
                if at is None:
                    raise ValueError(
                        f"{self.spec.name or self.spec.arch}: stream {c.stream} begins on a kept "
                        "prefix, but no snapshot of its recurrent state was restored "
                        "(SnapStep.RESTORE); its state stands nowhere")
                kept = self.fixed_kept.get(c.stream)
                if at != c.start and kept is not None and kept[0] == c.start < at:
                    self._roll_back(c.stream)    # a replay after refused drafts
                elif at != c.start:
                    raise ValueError(
                        f"{self.spec.name or self.spec.arch}: stream {c.stream}'s chunk starts "
                        f"at position {c.start}, but its recurrent state stands at {at}; a "
                        "recurrent layer's state only moves forward, one position at a time")
            for c in step.chunks:            # a verify chunk: its state before it kept
                if c.logits == EVERY_ROW and len(c.tokens) > 1:
                    self.fixed_kept[c.stream] = (c.start, [a[:, c.stream].copy() for a in self.kv.fixed])
                else:                        # past its last verify: the copy is not needed
                    self.fixed_kept.pop(c.stream, None)
        logits = self.model.forward(chunks, self.kv)
        for c in step.chunks:
            if self.fixed_at.get(c.stream) is not None:
                self.fixed_at[c.stream] += len(c.tokens)
        if logits is None:
            return None
        if self.xp is np:
            return logits
        return DeviceLogits(logits)            # copied to the host only as far as needed
