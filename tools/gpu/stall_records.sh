#!/bin/bash
# Per-request records of precise C=32 levels on a fresh real server, for replay in tests
# (issue 15: one-off stalls left out of the steady window; docs/validation/2026-12-01-h200-precise-measurement.md).
#
#   bash tools/gpu/stall_records.sh ARCHIVE_DIR OUT_DIR
#
# One real server (NGRAM, DRAFT draft tokens, breadth 1, the tiny model, triton attention,
# as a study of real-tiny-ngram.toml starts it); `autospec bench --precise` at C=32 with the
# study's defaults (one warmup wave, /freeze_gc after it, +-2% target) capped at SECS
# seconds, RUNS times one after the other on the same server (the first meets every batch
# shape for the first time). OUT_DIR: run-N.jsonl (records), run-N.json, server.log.
set -u
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${SECS:-20}; RUNS=${RUNS:-2}; DRAFT=${DRAFT:-12}
bash "$dir/serve.sh" 30000 --speculative-algorithm NGRAM --speculative-num-draft-tokens "$DRAFT" \
  --speculative-ngram-max-bfs-breadth 1 --cuda-graph-max-bs-decode 32 || exit 3
source "$dir/env.sh"
export PYTHONPATH=$repo/src:$PYTHONPATH
for ((run = 1; run <= RUNS; run++)); do
  python3 -m autospec.cli.main bench --url http://127.0.0.1:30000 --workload synthetic --input-len 32 \
    --output-len 256 --concurrency 32 --warmup 32 --freeze-gc --precise --max-seconds "$SECS" \
    --records "$out/run-$run.jsonl" --json "$out/run-$run.json" --quiet
done
cp /tmp/sglang-30000.log "$out/server.log"
pkill -f sglang.launch_server
for ((i = 0; i < 30; i++)); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
echo "done: $(ls "$out")"
