#!/bin/bash
# Does a seeded sampled request repeat on real SGLang? (issue 37, "one request stream")
#
#   bash tools/gpu/seed_probe.sh ARCHIVE_DIR OUT_DIR      (after run_study.sh built the trained pair)
#
# For each VARIANT (default: STANDALONE steps 5 / top-k 1 / draft 6 with the trained draft,
# without and with --enable-deterministic-inference), serves /tmp/sgmodels/t8b with the archive's
# base flags (pytorch sampling backend), sends one held-out-looking prompt REPEAT times at
# temperature 1 with sampling_seed 7 (64 new tokens, one request at a time), then again with
# 4 copies at once, and writes OUT_DIR/seed-probe.json: per variant, whether it started, each
# answer's output ids, and how many leading tokens every answer shares with the first.
set -u
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
REPEAT=${REPEAT:-3}
spec="--speculative-algorithm STANDALONE --speculative-draft-model-path /tmp/sgmodels/ds --speculative-num-steps 5 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6"
variants=("standalone|$spec" "standalone-deterministic|$spec --enable-deterministic-inference")
echo "[]" >"$out/seed-probe.json"
for v in "${variants[@]}"; do
  name=${v%%|*}; flags=${v#*|}
  # serve.sh: the archive's base flags (pytorch sampling), then these (the later flag wins)
  ready=0
  bash "$dir/serve.sh" 30000 --model-path /tmp/sgmodels/t8b --load-format auto --mem-fraction-static 0.5 $flags && ready=1
  echo "[seed_probe] $name: ready=$ready"
  python3 - "$out/seed-probe.json" "$name" "$ready" "$REPEAT" "$flags" <<'PY'
import json, sys, concurrent.futures as cf
import httpx
path, name, ready, repeat, flags = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5]
prompt = "def parse_arguments(argv):\n    parser = argparse.ArgumentParser(description=\n"
body = {"text": prompt, "sampling_params": {"temperature": 1.0, "max_new_tokens": 64, "sampling_seed": 7, "ignore_eos": True}}
def ask():
    r = httpx.post("http://127.0.0.1:30000/generate", json=body, timeout=120)
    data = r.json()
    return data.get("output_ids") or data.get("text") if r.status_code == 200 else f"HTTP {r.status_code}: {r.text[:200]}"
entry = {"variant": name, "flags": flags, "started": ready}
if ready:
    serial = [ask() for _ in range(repeat)]
    with cf.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda _: ask(), range(4)))
    def shared(a, b):
        n = 0
        for x, y in zip(a, b):
            if x != y:
                break
            n += 1
        return n
    answers = serial + together
    entry.update(answers=answers, shared_with_first=[shared(answers[0], a) for a in answers],
                 lengths=[len(a) for a in answers])
    print(f"[seed_probe] {name}: leading tokens shared with the first answer: {entry['shared_with_first']} of {entry['lengths']}")
found = json.load(open(path)); found.append(entry); json.dump(found, open(path, "w"), indent=1)
PY
  cp /tmp/sglang-30000.log "$out/server-$name.log"
  [[ $ready == 1 ]] || tail -5 "$out/server-$name.log"
  pkill -f sglang.launch_server
  for ((i = 0; i < 30; i++)); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
done
