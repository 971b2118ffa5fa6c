#!/bin/bash
# Run (or continue) an autospec study against real SGLang on a GPU machine without network.
#
#   bash run_study.sh ARCHIVE_DIR STATE_DIR OUT_DIR
#
# ARCHIVE_DIR  what tools/gpu/build_archive.sh wrote (site.tar.xz with SGLang 0.5.16, Optuna
#              and autospec; make_models.py (tools/gpu's: the tiny and the 8B-shaped models);
#              serve.sh whose env.sh block is reused here).
# STATE_DIR    where study-state.tar.xz from an earlier command lies (may be empty): the
#              study's SQLite file, trial logs, events log and artifacts. It is unpacked to
#              STUDY_DIR first and packed again into OUT_DIR/study-state.tar.xz at the end,
#              so a later command (on a fresh machine too) continues the same study.
# OUT_DIR      console.log, study-state.tar.xz, nvml.csv, extras.tar.xz (pareto, export, teardown).
#
# Environment (all optional):
#   TARGET=tiny         the model the default space serves: tiny (/tmp/sgmodels/m, 16 layers,
#                       hidden 2048), 8b (/tmp/sgmodels/m8b, Llama-3-8B's shapes, about 14 GB)
#                       or 8b-standalone (the trained target embedded in Llama-3-8B's shapes,
#                       /tmp/sgmodels/t8b, and its trained draft ds: build_pair.py builds them
#                       once per machine, about 5 min)
#   SPACE=<checkout>/src/autospec/search_spaces/real-tiny-eagle.toml (TARGET=8b: real-8b-ngram.toml,
#                       TARGET=8b-standalone: real-8b-standalone.toml),
#                       else the copy beside this script
#   STUDY=real-tiny-eagle (TARGET=8b: real-8b-ngram)  TRIALS=8  SEED=3
#   STUDY_TIMEOUT=390   autospec's --timeout: no new trial starts after this many seconds
#   DEADLINE=570        seconds this script may run in all; autospec gets SIGTERM before it
#   FINAL=0             1: after the study, start the exported best command for real, send it
#                       a request, stop it; then benchmarks/gpu_teardown.py if time is left
#   STUDY_DIR=/tmp/autospec-study
#   EXTRA_ARGS=""       more `autospec optimize` arguments, e.g. "--confirm 2"
#   AUTOSPEC_SRC=""     a checkout's src/ to import autospec from instead of the archive's wheel
#   MIN_LAUNCH_S=0      start autospec only if at least this many seconds are left for it once
#                       the models are built (a fresh machine's first launch took over 240 s)
#   WARM_UP_MARK=""     a file to touch once a warm-up launch succeeded: where no trial fits but
#                       WARM_UP_S=200 seconds do, one server of the space (warm_up.py) is started,
#                       asked two requests and stopped, so the next command's first launch is warm
#   LAUNCH_S=""         one warm launch's seconds: when set, STUDY_TIMEOUT is autospec's budget
#                       (known once the models are built) less LAUNCH_S, so no trial starts
#                       that cannot finish before the deadline; raised to what the study's own
#                       warm launches took (launch_seconds.py) where that is longer
set -u
t0=$SECONDS
left() { echo $((DEADLINE - (SECONDS - t0))); }
dir=$(cd "$1" && pwd); state=$(mkdir -p "$2" && cd "$2" && pwd); out=$(mkdir -p "$3" && cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)           # nvml_watch.py and export_best.py lie here
repo=$(cd "$here/../.." 2>/dev/null && pwd)     # the checkout, when run as tools/gpu/run_study.sh
TARGET=${TARGET:-tiny}
case $TARGET in
  tiny) model=m; space_name=real-tiny-eagle ;;
  8b) model=m8b; space_name=real-8b-ngram ;;
  8b-standalone) model=t8b; space_name=real-8b-standalone ;;
  *) echo "run_study: TARGET=$TARGET is not a target; use TARGET=tiny, TARGET=8b or TARGET=8b-standalone" >&2; exit 2 ;;
esac
default_space=$repo/src/autospec/search_spaces/$space_name.toml
[[ -f $default_space ]] || default_space=$here/$space_name.toml   # run from the archive folder alone
SPACE=${SPACE:-$default_space}
STUDY=${STUDY:-$space_name}; TRIALS=${TRIALS:-8}; SEED=${SEED:-3}
STUDY_TIMEOUT=${STUDY_TIMEOUT:-390}; DEADLINE=${DEADLINE:-570}; FINAL=${FINAL:-0}
STUDY_DIR=${STUDY_DIR:-/tmp/autospec-study}
storage="sqlite:///$STUDY_DIR/$STUDY.db"
[[ -f $SPACE ]] || { echo "run_study: search space $SPACE not found; set SPACE=path/to/$space_name.toml" >&2; exit 2; }
exec > >(tee -a "$out/console.log") 2>&1
say() { echo "[run_study +$((SECONDS - t0))s] $*"; }

# --- the archive, the models and env.sh (archive_env.sh)
source "$here/archive_env.sh"
say "unpacked; target $TARGET (/tmp/sgmodels/$model); $(cat "$dir/BUILT_FROM" 2>/dev/null)"
python3 - "$SPACE" <<'PY' || exit 3
import sys, os, importlib.metadata as md
import autospec, optuna, sglang, torch
from autospec.config import load_search_space
print("python", sys.version.split()[0], sys.executable, "| torch", torch.__version__, "| sglang", md.version("sglang"),
      "| optuna", optuna.__version__, "| autospec from", os.path.dirname(autospec.__file__))
base = os.environ["SGLANG_BASE_ARGS"].split()
flags = {base[i][2:].replace("-", "_"): base[i + 1] for i in range(0, len(base), 2)}
fixed = load_search_space(sys.argv[1]).server.flags
diff = {k: (v, fixed.get(k)) for k, v in flags.items() if str(fixed.get(k)) != v}
print("env.sh base flags", "all in the space's [server.flags]" if not diff else f"DIFFER: {diff}")
PY
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader

# --- the study's state from the last command
rm -rf "$STUDY_DIR"; mkdir -p "$STUDY_DIR"
if [[ -f $state/study-state.tar.xz ]]; then
  # into STUDY_DIR whatever the packed folder's name (a state packed under another STUDY_DIR too)
  tar xJf "$state/study-state.tar.xz" -C "$STUDY_DIR" --strip-components=1 && say "study state restored: $(ls "$STUDY_DIR" | tr '\n' ' ')"
else
  say "no earlier study state: a new study"
fi
python3 "$here/nvml_watch.py" 0.5 >"$out/nvml.csv" 2>/dev/null &
watch_pid=$!
# the state so far, every 30 s: a command cut by the device's own time limit (before the
# pack at the end) still hands on every trial finished by then
pack() {  # atomically; each packer writes its own part file
  tar cJf "$out/.state.$BASHPID" -C "$(dirname "$STUDY_DIR")" "$(basename "$STUDY_DIR")" \
    && mv "$out/.state.$BASHPID" "$out/study-state.tar.xz"
}
( while sleep 30; do pack; done ) 2>/dev/null &
pack_pid=$!

# --- the study (SIGTERM before the deadline: the trial in flight is torn down and recorded)
reserve=45; [[ $FINAL == 1 ]] && reserve=150
budget=$(( $(left) - reserve ))
min_launch=${MIN_LAUNCH_S:-0}
if [[ -n ${LAUNCH_S:-} && -f $STUDY_DIR/$STUDY.db ]]; then   # the study's own launches may take longer
  measured=$(python3 "$here/launch_seconds.py" "$storage" "$STUDY" 2>/dev/null)
  if [[ -n $measured ]] && (( measured > LAUNCH_S )); then
    say "this study's warm launches took up to ${measured}s: LAUNCH_S $LAUNCH_S -> $measured"
    LAUNCH_S=$measured; (( min_launch < 30 + LAUNCH_S )) && min_launch=$((30 + LAUNCH_S))
  fi
fi
# --timeout 0 would mean none: at least 1 s
[[ -n ${LAUNCH_S:-} ]] && STUDY_TIMEOUT=$(( budget - LAUNCH_S > 1 ? budget - LAUNCH_S : 1 ))
cmd=(python3 -m autospec.cli.main optimize --space "$SPACE" --study "$STUDY" --storage "$storage"
     --studies-dir "$STUDY_DIR" --trials "$TRIALS" --seed "$SEED" --timeout "${STUDY_TIMEOUT}s"
     --server-command "python3 -m sglang.launch_server" --preflight auto ${EXTRA_ARGS:-})
if (( budget < min_launch )); then
  say "no launch: ${budget}s left for autospec, under the ${min_launch}s one launch needs (the models stay built while the machine is warm)"
  if [[ -n ${WARM_UP_MARK:-} ]] && (( budget >= ${WARM_UP_S:-200} )); then
    if ! warm=$(python3 "$here/warm_up.py" "$SPACE"); then
      say "warm_up.py failed: no warm-up"
    else
      say "warm-up launch, nothing recorded (killed after ${budget}s at the latest): $warm"
      if timeout -k 20 -s TERM "$budget" bash -c "$warm"; then touch "$WARM_UP_MARK"; say "warmed in $((SECONDS - t0))s"; else say "warm-up exit $?"; fi
    fi
  fi
else
  say "autospec optimize (killed after ${budget}s at the latest): ${cmd[*]}"
  timeout -k 20 -s TERM "$budget" "${cmd[@]}"
  say "optimize exit $?"
fi
if [[ -f $STUDY_DIR/$STUDY.db ]]; then   # none yet when nothing launched and no state came in
  python3 -m autospec.cli.main pareto --study "$STUDY" --storage "$storage" | tee "$out/pareto.txt"
  python3 -m autospec.cli.main pareto --study "$STUDY" --storage "$storage" --json >"$out/pareto.json"
fi

# --- the exported command, started for real (not through autospec) and asked once
if [[ $FINAL == 1 ]] && (( $(left) > 100 )); then
  port=30000
  line=$(python3 "$here/export_best.py" --storage "$storage" --study "$STUDY" --port $port 2>"$out/export.txt")
  cat "$out/export.txt"; echo "$line" | tee -a "$out/export.txt"
  if [[ -n $line ]]; then
    say "starting the exported command; nvml before: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"
    printf 'exec %s\n' "$line" >/tmp/exported.sh
    setsid bash /tmp/exported.sh >/tmp/exported.log 2>&1 &   # $! is the server: its own session and group
    spid=$!; ready=0
    t_spawn=$SECONDS; wait_end=$(( SECONDS + $(left) - 40 ))
    while (( SECONDS < wait_end )); do
      kill -0 $spid 2>/dev/null || break
      [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health_generate") == 200 ]] && { ready=1; break; }
      sleep 1
    done
    say "exported server ready=$ready after $((SECONDS - t_spawn))s"
    if [[ $ready == 1 ]]; then
      curl -s "http://127.0.0.1:$port/generate" -H 'Content-Type: application/json' \
        -d '{"text": "1 2 3 4 5 6 7 8", "sampling_params": {"max_new_tokens": 32, "temperature": 0, "ignore_eos": true}}' \
        | tee -a "$out/export.txt"; echo | tee -a "$out/export.txt"
    fi
    kill -TERM -- -$spid 2>/dev/null; t_stop=$SECONDS
    for ((i = 0; i < 60; i++)); do
      ! pgrep -g $spid >/dev/null && [[ -z $(nvidia-smi --query-compute-apps=pid --format=csv,noheader) ]] && break
      sleep 0.5
    done
    say "exported server stopped: group gone, NVML apps: [$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' ')] $(nvidia-smi --query-gpu=memory.used --format=csv,noheader) after $((SECONDS - t_stop))s" | tee -a "$out/export.txt"
    tail -c 20000 /tmp/exported.log >"$out/exported-server.log"
  fi
fi
if [[ $FINAL == 1 && -f $repo/benchmarks/gpu_teardown.py ]] && (( $(left) > 75 )); then
  say "benchmarks/gpu_teardown.py"
  timeout -s INT $(( $(left) - 30 )) python3 "$repo/benchmarks/gpu_teardown.py" --gb 8 --repeats 1 --bare-wait 10 \
    --json "$out/gpu_teardown.json" | tee "$out/gpu_teardown.txt"
fi

# --- pack everything for the next command
kill $watch_pid $pack_pid 2>/dev/null; wait $pack_pid 2>/dev/null
rm -f "$out"/.state.*   # a part file the killed packer left would take one of the device's 8 returned files
pack
( cd "$out" && tar cJf extras.tar.xz --remove-files $(ls pareto.* export.txt exported-server.log gpu_teardown.* 2>/dev/null) )
say "done; $(du -sh "$out/study-state.tar.xz" | cut -f1) of study state"
