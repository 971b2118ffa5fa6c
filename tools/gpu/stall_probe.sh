#!/bin/bash
# Are the C=32 throughput stalls on the H200 the server's or the client's? (issue 15,
# docs/validation/2026-12-01-h200-precise-measurement.md, "Stalls at C=32")
#
#   bash tools/gpu/stall_probe.sh ARCHIVE_DIR OUT_DIR
#
# One real server (NGRAM, 16 draft tokens, breadth 1: the configuration whose C=32 interval
# stayed at +-7.5-9.6%), started with the archive's serve.sh and SGLang's decode log every
# 10 steps; then the same load twice for SECS seconds each: one `autospec bench` client at
# C=32, and two clients at C=16 each at the same time (two processes, two event loops).
# OUT_DIR: one-client.jsonl, two-a.jsonl, two-b.jsonl (every request's timings), their
# summaries (*.json), server.log (SGLang's "Decode batch ... gen throughput" lines with
# their timestamps), split (the server log's line count when the two-client run began) and
# clock (wall and monotonic time at one instant, to put both on one time line).
# benchmarks/stall_probe.py reads them.
set -u
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${SECS:-40}
bash "$dir/serve.sh" 30000 --speculative-algorithm NGRAM --speculative-num-draft-tokens 16 \
  --speculative-ngram-max-bfs-breadth 1 --cuda-graph-max-bs-decode 32 --decode-log-interval 10 || exit 3
source "$dir/env.sh"
export PYTHONPATH=$repo/src:$PYTHONPATH
bench() {
  python3 -m autospec.cli.main bench --url http://127.0.0.1:30000 --workload synthetic --input-len 32 \
    --output-len 256 --concurrency "$1" --duration "$SECS" --warmup "$1" --records "$out/$2.jsonl" --json "$out/$2.json" --quiet
}
python3 -c "import time; print(time.time(), time.monotonic())" >"$out/clock"  # records use the monotonic clock
bench 32 one-client
wc -l </tmp/sglang-30000.log >"$out/split"
bench 16 two-a & bench 16 two-b & wait
cp /tmp/sglang-30000.log "$out/server.log"
pkill -f sglang.launch_server
for ((i = 0; i < 30; i++)); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
echo "done: $(ls "$out")"
