#!/bin/bash
# Launches of NGRAM configurations of the 8B-shaped target, one after another, each measured
# by `autospec bench` (C=1 and C=32, the real-8b-ngram workload, the precision loop for
# MEASURE_S seconds a level), with every request record kept (docs/real-gpu-validation.md).
# A launch given its own SECONDS measures each level that long, to a target it cannot reach:
# a long level, whose records show how its stretches scatter around its own rate.
#
#   bash tools/gpu/bench_launches.sh ARCHIVE_DIR OUT_DIR LAUNCH [LAUNCH ...]
#     LAUNCH  DRAFT:BREADTH:NAME[:SECONDS], one launch each, in order, e.g. 4:10:a1:60 16:10:b1
#
# Environment: MEASURE_S=12 DEADLINE=570 (seconds in all; no launch starts with under 100 s
# left). OUT_DIR gets per launch NAME.{json,jsonl.xz,txt,log}.
set -u
t0=$SECONDS
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd); shift 2
here=$(cd "$(dirname "$0")" && pwd)
model=m8b
MEASURE_S=${MEASURE_S:-12}; DEADLINE=${DEADLINE:-570}
say() { echo "[bench_launches +$((SECONDS - t0))s] $*"; }
source "$here/archive_env.sh" || { say "archive setup failed"; exit 3; }
base=(model_path=/tmp/sgmodels/m8b load_format=dummy attention_backend=triton sampling_backend=pytorch
      grammar_backend=none speculative_algorithm=NGRAM cuda_graph_max_bs_decode=32 mem_fraction_static=0.5)
for launch in "$@"; do
  IFS=: read -r draft breadth name long <<<"$launch"
  left=$((DEADLINE - (SECONDS - t0)))
  (( left < 100 )) && { say "stopping before $name: ${left}s left"; exit 0; }
  seconds=${long:-$MEASURE_S}; target=0.02; [[ -n $long ]] && target=0.001
  args=(); for f in "${base[@]}" speculative_num_draft_tokens=$draft speculative_ngram_max_bfs_breadth=$breadth; do args+=(--flag "$f"); done
  say "$name: NGRAM $draft draft tokens, breadth $breadth; measure ${seconds}s a level"
  timeout -k 10 $((left - 10)) python3 -m autospec.cli.main bench --server-command "python3 -m sglang.launch_server" \
    "${args[@]}" --server-log "$out/$name.log" --ready-timeout 300 --concurrency 1,32 \
    --input-len 64 --output-len 256 --temperature 1 --top-k 4 --warmup-waves 1 --warmup-output-len 32 --freeze-gc \
    --precise --target-ci $target --max-seconds "$seconds" --timeout 120 \
    --json "$out/$name.json" --records "$out/$name.jsonl" --quiet >"$out/$name.txt" 2>&1
  say "$name: exit $?"; tail -4 "$out/$name.txt"
  xz -f "$out/$name.jsonl" "$out/$name.log" 2>/dev/null
done
say "done"
