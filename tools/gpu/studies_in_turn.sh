#!/bin/bash
# Several GPU studies in turn inside one device command: each continues from its state and gets
# the time still left, so a command does not idle once a study's queue has run out.
#
#   TOTAL=585 bash studies_in_turn.sh ARCHIVE_DIR OUT_DIR SPEC...
#
# SPEC      a file of shell assignments for one study: STUDY, TRIALS, SEED, STATE (the folder
#           holding its study-state.tar.xz; may be empty), EXTRA_ARGS, and SPACE, TARGET
#           (default 8b-standalone), AUTOSPEC_SRC as run_study.sh takes them, e.g.
#             STUDY=real-8b-standalone-grid TRIALS=35 SEED=38 STATE=.gpu38/g
#             EXTRA_ARGS="--sampler random --references --confirm 0 --no-race"
# OUT_DIR/STUDY/ gets study-state.tar.xz and logs.tar (run_study.sh's console.log, nvml.csv and
#           extras, packed once it ends): two files a study, so four studies keep within the 8
#           files a device command returns.
# TOTAL=585        seconds for all of it (one device command runs for at most 600)
# LAUNCH_S=110     one warm launch, measuring included (86-114 s on an H100 for the trained pair,
#                  greedy; run_study.sh raises it to what the study's own warm launches took)
# FIRST_LAUNCH_S=300  the first launch on a machine where no server has run yet (about 265 s on an
#                  H100: ready after about 165 s where warm ones take 62-85 s); the trained pair,
#                  when not built yet, is built before it (about 260 s) and does not count here
# MODELS=/tmp/sgmodels  where archive_env.sh builds the models; a file .launched there marks a
#                  machine where a launch finished (a study's console shows a trial line, or
#                  run_study.sh's warm-up launch ran where the pair's build left no time for a trial)
# A study starts only while 45 s (run_study.sh's reserve), 30 s (autospec's start) and one launch
# are left; once started, no trial starts that cannot finish (run_study.sh's LAUNCH_S).
set -u
t0=$SECONDS
here=$(cd "$(dirname "$0")" && pwd)
(( $# >= 3 )) || { echo "usage: TOTAL=585 studies_in_turn.sh ARCHIVE_DIR OUT_DIR SPEC..." >&2; exit 2; }
archive=$1; out=$2; shift 2
TOTAL=${TOTAL:-585}; LAUNCH_S=${LAUNCH_S:-110}; FIRST_LAUNCH_S=${FIRST_LAUNCH_S:-300}; MODELS=${MODELS:-/tmp/sgmodels}
for spec in "$@"; do
  [[ -f $spec ]] || { echo "studies_in_turn: no study file $spec; write one with STUDY=, TRIALS=, STATE=" >&2; exit 2; }
done
left() { echo $((TOTAL - (SECONDS - t0))); }
for spec in "$@"; do
  (
    STUDY=""; TRIALS=""; STATE=""; TARGET=8b-standalone
    source "$spec"
    [[ -n $STUDY && -n $TRIALS && -n $STATE ]] || { echo "studies_in_turn: $spec sets no STUDY, TRIALS or STATE; set all three" >&2; exit 2; }
    first=$LAUNCH_S; [[ -f $MODELS/.launched ]] || first=$FIRST_LAUNCH_S  # a machine's first launch is slower
    rest=$(left)
    if (( rest < 45 + 30 + first )); then
      echo "[studies_in_turn] $STUDY: ${rest}s left, under one launch (${first}s); not started"
      exit 0
    fi
    echo "[studies_in_turn] $STUDY from $STATE: ${rest}s left"
    export STUDY TRIALS TARGET SEED="${SEED:-3}" EXTRA_ARGS="${EXTRA_ARGS:-}"
    [[ -n ${SPACE:-} ]] && export SPACE
    [[ -n ${AUTOSPEC_SRC:-} ]] && export AUTOSPEC_SRC
    # straight into OUT: a command cut by the device's limit still returns the state run_study.sh packs every 30 s
    d=$out/$STUDY; mkdir -p "$d"
    warm_mark=""; [[ -f $MODELS/.launched ]] || warm_mark=$MODELS/.launched   # a fresh machine warms up where no trial fits
    DEADLINE=$rest LAUNCH_S=$LAUNCH_S MIN_LAUNCH_S=$((30 + first)) WARM_UP_MARK=$warm_mark bash "$here/run_study.sh" "$archive" "$STATE" "$d"
    grep -qE '^\[[0-9]+/[0-9]+\] trial ' "$d/console.log" 2>/dev/null && mkdir -p "$MODELS" && touch "$MODELS/.launched"
    cd "$d" && mapfile -t logs < <(ls -A | grep -vx -e study-state.tar.xz -e logs.tar)
    (( ${#logs[@]} == 0 )) || tar cf logs.tar --remove-files "${logs[@]}"
  ) || exit $?
done
echo "[studies_in_turn] done; $(left)s of ${TOTAL}s left"
