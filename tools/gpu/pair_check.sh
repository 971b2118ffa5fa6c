#!/bin/bash
# Build the trained pair on the GPU machine and check the embedded target: exactness and cost.
#
#   bash tools/gpu/pair_check.sh ARCHIVE_DIR OUT_DIR
#
# ARCHIVE_DIR  what tools/gpu/build_archive.sh wrote (site.tar.xz, serve.sh, make_models.py)
# OUT_DIR      console.log, pair.json (build_pair.py's report), exact.json and exact-bf16.json (check_exact.py),
#              cost-t8b.json and cost-m8b.json (`autospec bench` summaries), sglang-t8b.log
#
# 1. starts the random-weight 8B-shaped target (/tmp/sgmodels/m8b, --load-format dummy) without
#    speculation in the background: its one-time start-up (flashinfer JIT, CUDA-graph capture)
#    overlaps with 2.;
# 2. build_pair.py /tmp/sgmodels: corpus, tokenizer, target ts, draft ds, embedded target t8b;
# 3. benchmarks m8b at C=1 and C=32 (synthetic 64 words in, 256 tokens out, temperature 0),
#    then stops it;
# 4. starts t8b without speculation, runs check_exact.py against it (50 held-out sequences x 64
#    positions, teacher-forced) and the same benchmark, then stops it.
# Environment: DEADLINE=570 (seconds; a later step is skipped when too little is left).
set -u
t0=$SECONDS; DEADLINE=${DEADLINE:-570}
left() { echo $((DEADLINE - (SECONDS - t0))); }
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
exec > >(tee -a "$out/console.log") 2>&1
say() { echo "[pair_check +$((SECONDS - t0))s] $*"; }

[[ -d /tmp/sgsite/site ]] || { mkdir -p /tmp/sgsite && tar xJf "$dir/site.tar.xz" -C /tmp/sgsite; } || exit 3
[[ -f /tmp/sgmodels/m8b/config.json ]] || python3 "$dir/make_models.py" /tmp/sgmodels >/dev/null || exit 3
sed -n '/<<ENV$/,/^ENV$/{/<<ENV$/d;/^ENV$/d;p}' "$dir/serve.sh" | sed "s#\$dir#$dir#g" >"$dir/env.sh"
source "$dir/env.sh"
say "unpacked; $(python3 -c 'import torch, tokenizers, safetensors; print("torch", torch.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__)')"
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader

common=(--attention-backend triton --sampling-backend pytorch --grammar-backend none --cuda-graph-max-bs-decode 32
        --mem-fraction-static 0.5 --host 127.0.0.1)
bench=(python3 -m autospec.cli.main bench --input-len 64 --output-len 256 --temperature 0 --concurrency 1,32
       --warmup-waves 1 --warmup-output-len 32 --freeze-gc --precise --max-seconds 15 --quiet)
start() {  # PORT LOG ARGS...: the server in its own session; prints its pid
  local port=$1 log=$2; shift 2
  setsid python3 -m sglang.launch_server "${common[@]}" --port "$port" "$@" >"$log" 2>&1 &
  echo $!
}
ready() {  # PID PORT: wait for /health_generate
  local t=$SECONDS
  while kill -0 "$1" 2>/dev/null; do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$2/health_generate") == 200 ]] && { say "ready after $((SECONDS - t))s (port $2)"; return 0; }
    (( $(left) < 30 )) && break
    sleep 1
  done
  say "server on port $2 not ready"; return 1
}
stop() { kill -TERM -- "-$1" 2>/dev/null; for ((i = 0; i < 60; i++)); do pgrep -g "$1" >/dev/null || break; sleep 0.5; done; }

m8b=$(start 30001 /tmp/sglang-m8b.log --model-path /tmp/sgmodels/m8b --load-format dummy)
say "m8b starting (pid $m8b); building the pair"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
python3 "$here/build_pair.py" /tmp/sgmodels || { say "build_pair failed"; stop "$m8b"; exit 4; }
cp /tmp/sgmodels/pair.json "$out/"
say "pair built; $(du -sh /tmp/sgmodels/t8b | cut -f1) in t8b"

if ready "$m8b" 30001; then
  "${bench[@]}" --url http://127.0.0.1:30001 --json "$out/cost-m8b.json" && say "m8b benchmarked"
fi
stop "$m8b"; tail -c 4000 /tmp/sglang-m8b.log >"$out/sglang-m8b.log"

if (( $(left) > 200 )); then
  t8b=$(start 30000 /tmp/sglang-t8b.log --model-path /tmp/sgmodels/t8b)
  if ready "$t8b" 30000; then
    python3 "$here/check_exact.py" http://127.0.0.1:30000 /tmp/sgmodels/ts /tmp/sgmodels/exact-ids.json "$out/exact.json"
    say "check_exact exit $?"
    # the same against the small model computed in bf16, as SGLang computes: what is left is
    # arithmetic order, not the embedding
    python3 "$here/check_exact.py" http://127.0.0.1:30000 /tmp/sgmodels/ts /tmp/sgmodels/exact-ids.json \
      "$out/exact-bf16.json" --dtype bfloat16
    say "check_exact (bf16) exit $?"
    (( $(left) > 60 )) && "${bench[@]}" --url http://127.0.0.1:30000 --json "$out/cost-t8b.json" && say "t8b benchmarked"
  fi
  stop "$t8b"; tail -c 6000 /tmp/sglang-t8b.log >"$out/sglang-t8b.log"
fi
python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for name in ("m8b", "t8b"):
    f = out / f"cost-{name}.json"
    if not f.exists():
        print(name, "not measured")
        continue
    for level in json.loads(f.read_text())["levels"]:
        s = level["summary"]
        print(name, {k: v for k, v in s.items() if k in ("concurrency", "output_tok_s", "agg_output_tok_s", "requests")})
PY
say "done"
