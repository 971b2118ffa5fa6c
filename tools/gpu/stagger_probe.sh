#!/bin/bash
# Lockstep against phase-spread C=32 levels on one real server (docs/validation/2026-12-03-h200-8b-launches-of-one-configuration.md,
# "Phase-spread start"): the 8B-shaped target, NGRAM (DRAFT draft tokens, the default trie),
# the real-8b-ngram workload (64-token prompts, 256 output tokens, temperature 1, top_k 4).
# `autospec bench --precise` at C=32 capped at SECS seconds, RUNS times each way, alternating,
# then one LONG-second level each way at a fixed duration.
#
#   bash tools/gpu/stagger_probe.sh ARCHIVE_DIR OUT_DIR
#
# OUT_DIR/probe.tar.xz: {lock,spread}-N.jsonl (records) and .json, long-{lock,spread}.*,
# server.log (one file: the device returns at most 8).
set -u
dir=$(cd "$1" && pwd); dest=$(mkdir -p "$2" && cd "$2" && pwd); out=$(mktemp -d)
repo=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${SECS:-16}; RUNS=${RUNS:-4}; DRAFT=${DRAFT:-8}; LONG=${LONG:-40}
t0=$SECONDS
bash "$dir/serve.sh" 30000 --model-path /tmp/sgmodels/m8b --speculative-algorithm NGRAM \
  --speculative-num-draft-tokens "$DRAFT" --cuda-graph-max-bs-decode 32 --mem-fraction-static 0.5 || exit 3
echo "[stagger_probe] ready at +$((SECONDS - t0))s"
source "$dir/env.sh"
export PYTHONPATH=$repo/src:$PYTHONPATH
common=(--url http://127.0.0.1:30000 --workload synthetic --input-len 64 --output-len 256 --temperature 1
        --top-k 4 --concurrency 32 --warmup-waves 1 --warmup-output-len 32 --freeze-gc --timeout 120 --quiet)
for ((run = 1; run <= RUNS; run++)); do
  for way in lock spread; do
    extra=(); [[ $way == spread ]] && extra=(--stagger)
    python3 -m autospec.cli.main bench "${common[@]}" "${extra[@]}" --precise --max-seconds "$SECS" \
      --records "$out/$way-$run.jsonl" --json "$out/$way-$run.json"
    echo "[stagger_probe] $way-$run done at +$((SECONDS - t0))s"
  done
done
for way in lock spread; do
  extra=(); [[ $way == spread ]] && extra=(--stagger)
  python3 -m autospec.cli.main bench "${common[@]}" "${extra[@]}" --duration "$LONG" \
    --records "$out/long-$way.jsonl" --json "$out/long-$way.json"
  echo "[stagger_probe] long-$way done at +$((SECONDS - t0))s"
done
cp /tmp/sglang-30000.log "$out/server.log"
pkill -f sglang.launch_server
for ((i = 0; i < 30; i++)); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
tar cJf "$dest/probe.tar.xz" -C "$out" . && echo "done: $(ls "$out" | wc -l) files in $dest/probe.tar.xz"
