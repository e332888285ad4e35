"""`make guard-breaks`: break each guarantee by hand, on a copy of the tree, and show that
a named test fails; the unchanged copy fails none of them.

    python -m tools.guard_breaks [--only NAME ...] [--keep]

Each break is a text replacement in one or more files (it must match exactly once, or
the break is reported as stale: update it here when the code moves). The tree is copied
once (tracked and untracked, not ignored files) to a temp dir; each break is applied
there, its test run, the files restored. The working tree is never touched.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Break:
    name: str
    guarantee: str
    edits: tuple          # ((path, old, new), ...)
    test: str


G = "tests/guards/"
R = "tests/model/test_moe_router.py::"
BREAKS = [
    Break("pages out of order on one rank", "the same page ids on every rank",
          (("server/engine/engine.py",
            "            self.tables[step.stream] = step.page_ids\n",
            "            self.tables[step.stream] = tuple(sorted(step.page_ids)) if self.rank else step.page_ids\n"),),
          G + "test_rank_guards.py::test_a_follower_maps_the_ids_rank_0_names"),
    Break("a follower allocates its own page", "followers never take their own ids",
          (("server/engine/engine.py",
            "            self.tables[step.stream] = step.page_ids\n",
            "            if self.rank:\n"
            "                from server.planner.pool import Pool\n"
            "                own = self.__dict__.setdefault('_own', Pool(self.pool.pages))\n"
            "                self.tables[step.stream] = own.take(len(step.page_ids))\n"
            "            else:\n"
            "                self.tables[step.stream] = step.page_ids\n"),
           ("server/engine/engine.py",
            "            self.tables.pop(step.stream, None)\n",
            "            gone = self.tables.pop(step.stream, None)\n"
            "            if self.rank and gone:\n"
            "                self._own.give(gone)\n")),
          G + "test_rank_guards.py::test_a_follower_maps_the_ids_rank_0_names"),
    Break("a prompt-cache hit skips the ids compare", "a hash collision never joins two prompts",
          (("server/planner/prompt_cache.py",
            "            if node is None or node.ids != part or node.parent != prev:\n",
            "            if node is None or node.parent != prev:\n"),),
          "tests/planner/test_prompt_cache.py::test_a_hash_collision_never_joins_two_prompts"),
    Break("a page freed twice", "free + held + kept == total",
          (("server/planner/pool.py",
            "                raise PoolCorrupt(f\"give of page {i}, which no stream holds\")\n",
            "                heapq.heappush(self._free, i)\n"
            "                continue\n"),),
          "tests/planner/test_pool.py::test_giving_a_page_twice_is_caught"),
    Break("the plan funds the prompt cache before the floor", "one conversation can always reach --context",
          (("server/planner/plan.py",
            "        slots, (cache_pages, notes) = 0, _cache(cache_bytes, p, min(cap) - (floor + n - 1), notes)\n",
            "        slots, (cache_pages, notes) = 0, _cache(cache_bytes, p, min(cap), notes)\n"),),
          "tests/planner/test_plan.py::test_prompt_cache_is_trimmed_with_a_note"),
    Break("a fingerprint skips a field", "every rank mismatch named",
          (("server/ranks/fingerprint.py",
            "              parallel=parallel, prefill_chunk=prefill_chunk,\n",
            "              parallel=parallel,\n"),),
          G + "test_fingerprint_guards.py::test_make_fills_every_field_the_check_knows_and_only_those"),
    Break("a round reorders streams", "solo == concurrent",
          (("server/scheduler.py",
            "            logits = self.driver.run(RoundStep(tuple(rnd.chunks)))\n",
            "            logits = self.driver.run(RoundStep(tuple(sorted(rnd.chunks, key=lambda c: -c.stream))))\n"),),
          G + "test_scheduler_guards.py::test_each_stream_gets_its_own_tokens_alone_or_in_company"),
    Break("an attention row reads one row past its position", "resumed == fresh, chunked == whole",
          (("kernels/attention.py",
            "        L = start + i + 1\n",
            "        L = start + i + 2\n"),),
          G + "test_attention_guards.py::test_a_row_reads_nothing_past_its_position"),
    Break("a window and a page with different row order", "paged == window",
          (("kernels/attention.py",
            "    return pool[list(table[p0:pages])].reshape(-1, *pool.shape[2:])[a:b]\n",
            "    return pool[list(table[p0:pages])][:, ::-1].reshape(-1, *pool.shape[2:])[a:b]\n"),),
          G + "test_attention_guards.py::test_a_window_and_pages_hold_the_rows_in_the_same_order"),
    Break("a verify walk goes on past a refused draft", "drafted == plain",
          (("server/drafts/verify.py",
            "        if j == len(drafts) or tok != drafts[j]:\n",
            "        if j == len(drafts) or tok != drafts[j] and j:\n"),),
          "tests/drafts/test_drafts_exact.py::test_drafted_equals_plain"),
    Break("a verify chunk keeps one row too many", "rejected rows leave no trace",
          (("server/round_take.py",
            "    a.drafts.verified(len(drafts), accepted)\n",
            "    a.drafts.verified(len(drafts), accepted)\n"
            "    a.fed += taken <= len(drafts) and a.req.id in sched.active\n"),),
          "tests/drafts/test_drafts_exact.py::test_drafted_equals_plain"),
    Break("drafts past the reply's end", "a verify chunk writes only rows plain decoding writes",
          (("server/drafts/policy.py",
            "        k = min(tokens, left - 1, budget)\n",
            "        k = min(tokens, left, budget)\n"),),
          "tests/drafts/test_drafts_exact.py::test_drafts_stay_within_the_rows_plain_decoding_writes"),
    Break("a full round still drafts", "drafting backs off under load",
          (("server/drafts/policy.py",
            "    budget = 0 if prefilling else rows_cap - len(streams)\n",
            "    budget = rows_cap\n"),),
          "tests/drafts/test_drafts_exact.py::test_drafting_backs_off_as_the_round_fills"),
    Break("draft: false drafted anyway", "a request that says draft: false is never drafted",
          (("server/scheduler.py",
            "        if self.draft_source is None or not req.draft or not self.sampling.verifies(st):\n",
            "        if self.draft_source is None or not self.sampling.verifies(st):\n"),),
          "tests/drafts/test_drafts_exact.py::test_a_request_that_says_draft_false_is_never_drafted"),
    # MTP drafts (server/drafts/mtp.py, server/engine/mtp_pass.py): issue 35
    Break("a verify walk goes on past a refused MTP draft", "drafted == plain (MTP)",
          (("server/drafts/verify.py",
            "        if j == len(drafts) or tok != drafts[j]:\n",
            "        if j == len(drafts) or tok != drafts[j] and j:\n"),),
          "tests/drafts/test_drafts_mtp.py::test_mtp_drafted_equals_plain"),
    Break("the MTP pass skips a round's first new row", "the MTP layer's KV rows are every valid position's",
          (("server/scheduler.py",
            "            entries.append((c.stream, start, a.ids[start + 1:a.fed + 1], src, depth,\n",
            "            entries.append((c.stream, start + 1, a.ids[start + 2:a.fed + 1], src + 1, depth,\n"),),
          "tests/drafts/test_drafts_mtp.py::test_mtp_rows_equal_one_pass_over_the_sequence"),
    Break("the MTP pass reads the next position's trunk row", "row i reads h_i",
          (("server/engine/mtp_pass.py",
            "        src = np.concatenate([np.arange(c.src, c.src + len(c.tokens)) for c in live])\n",
            "        src = np.concatenate([np.arange(c.src, c.src + len(c.tokens)) for c in live])\n"
            "        src = np.minimum(src + 1, len(hid) - 1)\n"),),
          "tests/drafts/test_drafts_mtp.py::test_mtp_rows_equal_one_pass_over_the_sequence"),
    Break("an MTP chain row overwrites the last valid one", "chain rows lie past the valid rows",
          (("server/engine/mtp_pass.py",
            "            rc.append(RoundChunk(table, prow, at[s] - 1 + j + 1, (out[s][-1],), True, (), s))\n",
            "            rc.append(RoundChunk(table, prow, at[s] - 1 + j, (out[s][-1],), True, (), s))\n"),),
          "tests/drafts/test_drafts_mtp.py::test_mtp_rows_equal_one_pass_over_the_sequence"),
    Break("the MTP layer reads [h | e] for [e | h]", "the MTP layer is the checkpoint's (float64 definition)",
          (("server/families/nextn.py",
            "xp.concatenate([en, hn], axis=1)",
            "xp.concatenate([hn, en], axis=1)"),),
          "tests/drafts/test_drafts_mtp.py::test_mtp_logits_equal_the_float64_definition"),
    Break("the plan leaves out the MTP layer's rows", "the plan counts the MTP rows",
          (("server/planner/layout.py",
            "                      moe_floats(spec, shard), kv_spec(spec, shard))\n",
            "                      moe_floats(spec, shard), kv_spec(replace(spec, mtp_layers=0), shard))\n"),
           ("server/planner/layout.py",
            "from dataclasses import dataclass\n",
            "from dataclasses import dataclass, replace\n")),
          "tests/drafts/test_drafts_mtp.py::test_mtp_rows_are_planned_as_a_layer_after_the_trunk"),
    # drafting never lowers throughput under load (issue 35, drafts-2)
    Break("the pace ignores the round's load", "a busy round drafts only what pays at its rate",
          (("server/drafts/pace.py",
            "        rows, tokens = load\n",
            "        rows, tokens = 1, 1.0\n"),),
          "tests/drafts/test_drafts_pace.py::test_a_busy_round_drafts_only_what_pays_at_its_rate"),
    Break("a full round still runs the MTP pass", "a full round defers the MTP pass",
          (("server/scheduler.py",
            "            if depth == 0 and a.mtp_kept + new <= self.MTP_KEPT:\n",
            "            if False and a.mtp_kept + new <= self.MTP_KEPT:\n"),),
          "tests/drafts/test_drafts_mtp.py::test_a_full_round_defers_the_mtp_pass"),
    Break("a replay does not roll the recurrent state back", "drafted == plain on a recurrent family",
          (("server/engine/engine.py",
            "        for a, kept in zip(self.kv.fixed, arrays):\n            a[:, stream] = kept\n",
            "        pass\n"),),
          "tests/drafts/test_drafts_recurrent.py::test_recurrent_drafted_equals_plain"),
    Break("the recurrent state kept after the verify chunk, not before", "drafted == plain on a recurrent family",
          (("server/engine/engine.py",
            "        logits = self.model.forward(chunks, self.kv)\n        for c in step.chunks:\n            if self.fixed_at",
            "        logits = self.model.forward(chunks, self.kv)\n        for c in step.chunks:\n            if c.stream in self.fixed_kept and self.fixed_kept[c.stream][0] == c.start:\n                self.fixed_kept[c.stream] = (c.start, [a[:, c.stream].copy() for a in self.kv.fixed])\n        for c in step.chunks:\n            if self.fixed_at"),),
          "tests/drafts/test_drafts_recurrent.py::test_recurrent_drafted_equals_plain"),
    Break("a replay chunk's verify walk starts at its first row", "drafted == plain on a recurrent family",
          (("server/round_take.py",
            "            verify(sched, a, logits, first[i] + a.fed - c.start, drafted[i], best, now)\n",
            "            verify(sched, a, logits, first[i], drafted[i], best, now)\n"),),
          "tests/drafts/test_drafts_recurrent.py::test_recurrent_drafted_equals_plain"),
    Break("recurrent drafts cross a page boundary", "a page-boundary snapshot never stands on a refusable draft",
          (("server/round_build.py",
            "    return b - fed - 1\n",
            "    return b - fed - 1 + page_rows\n"),),
          "tests/drafts/test_drafts_recurrent.py::test_no_verify_chunk_drafts_across_a_page_boundary"),
    Break("the MTP catch-up reads the round's rows for the kept ones", "a deferred pass catches up from the kept trunk rows",
          (("server/engine/mtp_pass.py",
            "            parts.append(rows)\n",
            "            parts.append(hid[src[o:o + nk]])\n"),),
          "tests/drafts/test_drafts_mtp.py::test_a_full_round_defers_the_mtp_pass"),
    Break("a row group's rows read one key past their own", "a chunk's rows equal each row alone (grouped attention)",
          (("kernels/attention_cpu.py",
            "    L0 = starts[c] + t0 - spans[c, 0] + 1           # row r of the group reads L0 + r keys\n",
            "    L0 = starts[c] + t0 - spans[c, 0] + 2           # row r of the group reads L0 + r keys\n"),),
          "tests/model/test_cpu_layer.py::test_a_chunks_rows_equal_each_row_alone"),
    Break("a row group reads its rows' values with the first row's weights", "a chunk's rows equal each row alone (grouped attention)",
          (("kernels/attention_cpu.py",
            "                axpy_heads16(out[t0 + r, h * group:(h + 1) * group], s[r, :, j:j + n], vp[:n, h])\n",
            "                axpy_heads16(out[t0 + r, h * group:(h + 1) * group], s[0, :, j:j + n], vp[:n, h])\n"),),
          "tests/model/test_cpu_layer.py::test_a_chunks_rows_equal_each_row_alone"),
    # the mixture-of-experts router (kernels/moe.py's route): issue 31
    Break("the router drops the renormalisation", "the chosen weights sum to 1 (norm_topk_prob)",
          (("kernels/moe.py",
            "    if routing.norm:\n",
            "    if False:\n"),),
          R + "test_softmax_top2_renormalised"),
    Break("a softmax router squashes with a sigmoid", "the router is the checkpoint's kind",
          (("kernels/moe.py",
            "        p = e / e.sum(axis=1, keepdims=True)\n",
            "        p = 1.0 / (1.0 + np.exp(-z))\n"),),
          R + "test_softmax_top2_renormalised"),
    Break("router ties go to the higher expert id", "a tie chooses the lower id (a choice is a function of the row)",
          (("kernels/moe.py",
            "    ids = np.argsort(-s, axis=1, kind=\"stable\")[:, :routing.k]\n",
            "    ids = (E - 1 - np.argsort(-s[:, ::-1], axis=1, kind=\"stable\"))[:, :routing.k]\n"),),
          R + "test_ties_choose_the_lower_id"),
    Break("the selection bias weighs too", "the bias selects, the unbiased sigmoid weighs",
          (("kernels/moe.py",
            "    w = np.take_along_axis(p, ids, axis=1)\n",
            "    w = np.take_along_axis(s, ids, axis=1)\n"),),
          R + "test_sigmoid_bias_selects_but_does_not_weigh"),
    Break("routed_scaling_factor skipped", "weights times routed_scaling_factor",
          (("kernels/moe.py",
            "    if routing.scale != 1.0:\n",
            "    if False:\n"),),
          R + "test_sigmoid_bias_selects_but_does_not_weigh"),
    Break("a group scored by its best expert alone", "a group's score is the sum of its two best",
          (("kernels/moe.py",
            "[:, :, :2].sum(axis=2)",
            "[:, :, :1].sum(axis=2)"),),
          R + "test_group_limited_top_k_keeps_the_best_group_only"),
    Break("the softmax's max taken over the round", "a token's routing is its own row's (solo == concurrent)",
          (("kernels/moe.py",
            "        e = np.exp(z - z.max(axis=1, keepdims=True))\n",
            "        e = np.exp(z - z.max())\n"),),
          R + "test_a_rows_weights_ignore_the_other_rows_scale"),
    # the experts (kernels/moe.py's combine, kernels/moe_cpu.py's grouped products, the family)
    Break("a batch sums its experts in another order", "one summation order whatever the batch (solo == concurrent)",
          (("kernels/moe.py",
            "    out = w[:, 0, None] * y[:, 0]\n"
            "    for j in range(1, y.shape[1]):\n"
            "        out += w[:, j, None] * y[:, j]\n",
            "    order = range(y.shape[1]) if y.shape[0] == 1 else range(y.shape[1] - 1, -1, -1)\n"
            "    order = list(order)\n"
            "    out = w[:, order[0], None] * y[:, order[0]]\n"
            "    for j in order[1:]:\n"
            "        out += w[:, j, None] * y[:, j]\n"),),
          "tests/model/test_moe_engine.py::test_solo_equals_concurrent"),
    Break("a grouped product's row depends on the other rows", "an expert's row is its own (solo == concurrent)",
          (("kernels/moe_cpu.py",
            "    x = np.ascontiguousarray(x, dtype=np.float32)\n"
            "    out = np.empty((x.shape[0], stack.data.shape[1]), np.float32)\n",
            "    x = np.ascontiguousarray(x, dtype=np.float32)\n"
            "    x = (x * np.abs(x).max()) / np.abs(x).max()    # a scale shared by the round\n"
            "    out = np.empty((x.shape[0], stack.data.shape[1]), np.float32)\n"),),
          "tests/model/test_moe_engine.py::test_grouped_experts_give_the_loops_bytes"),
    Break("an MoE layer's partial sum not all-reduced", "TP=2/3 == TP=1",
          (("server/families/moe.py",
            "    if m.all_reduce is not None:                       # [T, d] partial under TP\n",
            "    if m.all_reduce is not None and L.router is None:  # [T, d] partial under TP\n"),),
          "tests/ranks/test_moe_tp.py::test_tp_equals_tp1"),
    # snapshot slots (recurrent families' prompt cache: server/engine/engine.py, admission)
    Break("a resumed stream's snapshot not restored", "resumed == fresh (recurrent states)",
          (("server/engine/engine.py",
            "            self.kv.restore(step.stream, step.slot)\n",
            "            pass                               # the snapshot never copied in\n"),),
          "tests/model/test_qwen3next_snap.py::test_three_turns_resumed_equal_cold"),
    Break("a pending snapshot taken one position past its page boundary",
          "a kept state stands where its prefix ends",
          (("server/engine/engine.py",
            "        return (slot, b - start) if b >= start and b > 0 else ()\n",
            "        return (slot, min(b - start + 1, n)) if b >= start and b > 0 else ()\n"),),
          "tests/model/test_qwen3next_snap.py::test_a_pending_slot_keeps_the_state_at_its_page_boundary"),
    Break("a kept snapshot attached one page late", "a kept state stands where its prefix ends",
          (("server/planner/admission.py",
            "        return (rows - 1) // self.page_rows if rows > 0 else 0\n",
            "        return (rows - 1) // self.page_rows + 1 if rows > 0 else 0\n"),),
          "tests/model/test_qwen3next_snap.py::test_three_turns_resumed_equal_cold"),
    # Q8_0 products against q8_0 x (kernels/kquant_cpu.py: the switched families' Q8_0_X8)
    Break("x's q8_0 block scale taken over the round's rows", "a row's q8_0 x is its own (solo == concurrent)",
          (("kernels/kquant_cpu.py",
            "            for j in range(32):\n"
            "                m = max(m, xi[i, o + j] & np.int32(0x7FFFFFFF))\n",
            "            for j in range(32 * M):\n"
            "                m = max(m, xi[j // 32, o + j % 32] & np.int32(0x7FFFFFFF))\n"),),
          "tests/model/test_q8_0_int8.py::test_the_experts_grouped_path_equals_each_row_alone"),
    Break("a Q5_0 pair's second block read with the first's fifth bits", "Q5_0 on q8_0 x is Q8_0_DEF on its repack",
          (("kernels/kquant_cpu.py",
            "    qh1 = builder.zext(_load(builder, b0, 24, _i32), _i64)\n",
            "    qh1 = builder.zext(_load(builder, b0, 2, _i32), _i64)\n"),),
          "tests/model/test_q5_0_int8.py::test_grouped_tiles_at_every_group_start_give_the_definitions_bytes"),
    Break("the Q5_0 products left on float32 x", "a switched family's Q5_0 products take q8_0 x",
          (("kernels/qmatmul.py",
            'Q80_KINDS = ("Q8_0", "Q5_0")',
            'Q80_KINDS = ("Q8_0",)'),),
          "tests/model/test_q5_0_int8.py::test_a_q4_k_m_files_q5_0_products_take_q8_0_x"),
    # K-quant products against q8_K x (kernels/kquant_cpu.py's definition: the lane chain an fma)
    Break("the one-row K-quant tiles' lane chain unfused (fmul, then fadd)", "every K-quant form is dot_ref's chain",
          (("kernels/kquant_cpu.py",
            "            a = _fma(builder, dd, builder.sitofp(T, _v16f), out[e])\n",
            "            a = builder.fadd(out[e], builder.fmul(dd, builder.sitofp(T, _v16f)))\n"),),
          "tests/model/test_kquant_q8.py::test_grouped_tiles_at_every_group_start_give_the_reference_bytes"),
    Break("dot_ref's fma rounded twice (a float64 sum to float32)", "dot_ref's fma is one rounding",
          (("kernels/kquant_cpu.py",
            "    if err != 0.0 and math.isfinite(s):\n",
            "    if False:\n"),),
          "tests/model/test_kquant_q8.py::test_dot_refs_fma_is_one_rounding"),
]


def copy_tree(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for f in files:
        src = ROOT / f
        if f and src.is_file():
            out = dst / f
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)


def run_test(work: Path, test: str) -> tuple[bool, str, float]:
    env = dict(os.environ, PYTHONPATH=str(work))
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test],
                       cwd=work, env=env, capture_output=True, text=True)
    tail = [ln for ln in r.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()[-200:]
    return r.returncode == 0, (tail[0] if tail else last), time.time() - t0


def apply(work: Path, b: Break) -> dict:
    saved = {}
    for path, old, new in b.edits:
        f = work / path
        text = saved.get(path) or f.read_text()
        saved.setdefault(path, text)
        cur = f.read_text()
        if cur.count(old) != 1:
            for p, t in saved.items():
                (work / p).write_text(t)
            raise LookupError(f"{path}: the text to break is found {cur.count(old)} times, not once")
        f.write_text(cur.replace(old, new))
    return saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", help="write the table (markdown) here too")
    a = ap.parse_args(argv)
    breaks = [b for b in BREAKS if not a.only or b.name in a.only]
    work = Path(tempfile.mkdtemp(prefix="foldserve-breaks-"))
    copy_tree(work)
    rows, bad = [], 0
    tests = sorted({b.test for b in breaks})
    for t in tests:                                   # the unchanged copy fails none
        ok, line, s = run_test(work, t)
        rows.append(("(unchanged tree)", "-", t, "passes" if ok else "FAILS", ok, s, line))
        bad += not ok
    for b in breaks:
        try:
            saved = apply(work, b)
        except LookupError as e:
            rows.append((b.name, b.guarantee, b.test, f"STALE: {e}", False, 0.0, ""))
            bad += 1
            continue
        try:
            ok, line, s = run_test(work, b.test)
        finally:
            for p, t in saved.items():
                (work / p).write_text(t)
        rows.append((b.name, b.guarantee, b.test, "fails (caught)" if not ok else "PASSES (missed)",
                     not ok, s, line))
        bad += ok
    lines = ["| break | guarantee | test | result | how it failed | s |", "|---|---|---|---|---|---:|"]
    for name, g, t, res, good, s, line in rows:
        why = line.split(" - ", 1)[1] if line.startswith("FAILED") and " - " in line else ""
        why = why.replace("|", "\\|")[:90]
        lines.append(f"| {name} | {g} | `{t}` | {res} | {why} | {s:.1f} |")
    lines.append("")
    lines.append(f"{sum(1 for r in rows if r[0] != '(unchanged tree)' and r[4])} of {len(breaks)} breaks "
                 f"caught; unchanged tree: {sum(1 for r in rows if r[0] == '(unchanged tree)' and not r[4])} "
                 f"of {len(tests)} tests fail")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    if a.keep:
        print("copy kept at", work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
