#!/bin/bash
# Do Python garbage collections in SGLang's scheduler cause the C=32 stalls on the H200?
# (issue 15, docs/validation/2026-12-01-h200-precise-measurement.md, "Stalls at C=32")
#
#   bash tools/gpu/gc_probe.sh ARCHIVE_DIR OUT_DIR
#
# One real server (NGRAM, 16 draft tokens, breadth 1, as tools/gpu/stall_probe.sh) started
# with SGLANG_LOG_GC=1 (SGLang 0.5.16 then logs every collection's start, end, generation
# and duration) and its decode log every 10 steps; one `autospec bench` client at C=32 for
# SECS seconds, twice (the second run is the control: as warm as the server gets without
# the freeze); then SGLang's own POST /freeze_gc (moves every live object out of the
# collector's generations, as SGLang's long-GC warning advises after warmup) and the same
# load again. OUT_DIR: before.jsonl/.json, again.jsonl/.json, frozen.jsonl/.json,
# server.log, freeze.txt, clock. benchmarks/stall_probe.py --runs reads them.
set -u
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${SECS:-35}
SGLANG_LOG_GC=1 bash "$dir/serve.sh" 30000 --speculative-algorithm NGRAM --speculative-num-draft-tokens 16 \
  --speculative-ngram-max-bfs-breadth 1 --cuda-graph-max-bs-decode 32 --decode-log-interval 10 || exit 3
source "$dir/env.sh"
export PYTHONPATH=$repo/src:$PYTHONPATH
bench() {
  python3 -m autospec.cli.main bench --url http://127.0.0.1:30000 --workload synthetic --input-len 32 \
    --output-len 256 --concurrency 32 --duration "$SECS" --warmup 32 --records "$out/$1.jsonl" --json "$out/$1.json" --quiet
}
python3 -c "import time; print(time.time(), time.monotonic())" >"$out/clock"  # records use the monotonic clock
bench before
bench again
curl -s -X POST http://127.0.0.1:30000/freeze_gc >"$out/freeze.txt"
bench frozen
cp /tmp/sglang-30000.log "$out/server.log"
pkill -f sglang.launch_server
for ((i = 0; i < 30; i++)); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
echo "done: $(ls "$out")"
