#!/bin/bash
# On the GPU machine: the killed-tuner scenario of tools/gpu/kill_resume.py against real
# SGLang, on the tiny EAGLE space with a log-uniform mem_fraction_static.
#
#   bash tools/gpu/kill_resume.sh ARCHIVE_DIR OUT_DIR
#
# ARCHIVE_DIR is what tools/gpu/build_archive.sh wrote. Writes OUT_DIR/{kill_resume.json,
# first.log,second.log,nvml.csv,events.log,trials.json,pareto.json}.
set -u
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
TRIALS=${TRIALS:-3}; KILL_AT=${KILL_AT:-2}; STUDY=logmem; STUDY_DIR=/tmp/autospec-kill
[[ -d /tmp/sgsite/site ]] || { mkdir -p /tmp/sgsite && tar xJf "$dir/site.tar.xz" -C /tmp/sgsite; } || exit 3
[[ -f /tmp/sgmodels/m/config.json ]] || python3 "$dir/make_models.py" /tmp/sgmodels >/dev/null || exit 3
sed -n '/<<ENV$/,/^ENV$/{/<<ENV$/d;/^ENV$/d;p}' "$dir/serve.sh" | sed "s#\$dir#$dir#g" >"$dir/env.sh"
source "$dir/env.sh"
echo "kill_resume: $(cat "$dir/BUILT_FROM" 2>/dev/null)"
rm -rf "$STUDY_DIR"; mkdir -p "$STUDY_DIR"
space=$STUDY_DIR/space.toml
# The bundled tiny EAGLE space, with mem_fraction_static log-uniform over [0.02, 0.7].
python3 - "$repo/src/autospec/search_spaces/real-tiny-eagle.toml" "$space" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
start = text.index("[params.mem_fraction_static]")
end = text.index("\n[", start + 1)
text = text[:start] + '[params.mem_fraction_static]\ntype = "float"\nlow = 0.02\nhigh = 0.7\nlog = true\n' + text[end:]
open(sys.argv[2], "w").write(text)
PY
grep -A4 "params.mem_fraction_static" "$space"
python3 "$here/nvml_watch.py" 0.5 >"$out/nvml.csv" 2>/dev/null &
watch=$!
storage="sqlite:///$STUDY_DIR/$STUDY.db"
python3 "$here/kill_resume.py" --out "$out" --trials-dir "$STUDY_DIR/$STUDY-trials" --kill-at "$KILL_AT" \
  --wait 30 --first-timeout 330 --second-timeout 300 -- \
  python3 -m autospec.cli.main optimize --space "$space" --study "$STUDY" --storage "$storage" \
  --studies-dir "$STUDY_DIR" --trials "$TRIALS" --seed 3 --server-command "python3 -m sglang.launch_server" \
  --preflight auto --quiet
kill $watch 2>/dev/null
cp "$STUDY_DIR/$STUDY-events.log" "$out/events.log" 2>/dev/null
python3 -m autospec.cli.main pareto --study "$STUDY" --storage "$storage" --json >"$out/pareto.json" 2>&1
python3 - "$storage" "$STUDY" >"$out/trials.json" <<'PY'
import json, sys, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
s = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
print(json.dumps([{"number": t.number, "state": t.state.name, "outcome": t.user_attrs.get("outcome"),
                   "launched": t.user_attrs.get("launched"), "candidate": t.user_attrs.get("candidate"),
                   "seconds": t.user_attrs.get("seconds"), "retry_of": t.user_attrs.get("retry_of"),
                   "values": t.values} for t in s.trials], indent=1))
PY
tail -5 "$out/second.log"; cat "$out/events.log" | tail -20
