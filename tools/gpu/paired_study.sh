#!/bin/bash
# Launches of a few configurations in alternation, in one study, on one request stream: issue
# 37's paired check (docs/validation/2026-12-04-h200-paired-launches.md).
#
#   CONFIGS="speculative_num_steps=6 speculative_num_steps=5" TOTAL=6 SPACE=two.toml STUDY=pair \
#     TARGET=8b-standalone bash paired_study.sh ARCHIVE_DIR STATE_DIR OUT_DIR
#
# Without an earlier state, run_study.sh first launches one trial (which creates the study);
# then queue_trials.py queues the rest (the least launched configuration next) and run_study.sh
# continues with --remeasure --no-references --confirm 0 until the study holds TOTAL launches
# or DEADLINE (seconds, this script's whole run) is near. Exit 75: the models were built but no
# launch fitted (a fresh machine), so no study exists yet; the same command again continues. Arguments as run_study.sh's; its
# environment (TARGET, SPACE, STUDY, AUTOSPEC_SRC) is passed on.
set -u -o pipefail  # a queue that failed stops the script (exit 3)
t0=$SECONDS
DEADLINE=${DEADLINE:-570}; TOTAL=${TOTAL:-6}
here=$(cd "$(dirname "$0")" && pwd)
archive=$1; state=$2; out=$(mkdir -p "$3" && cd "$3" && pwd)
export EXTRA_ARGS="--remeasure --no-references --confirm 0 --no-race --sampler random ${EXTRA_ARGS:-}"
left() { echo $((DEADLINE - (SECONDS - t0))); }
if [[ ! -f $state/study-state.tar.xz ]]; then
  # on a fresh machine the pair build (226-269 s) can leave too little for the first launch (over
  # 240 s on a fresh H100, 2026-12-06): then no launch is started, and the next command, on the
  # warm machine with the pair built, creates the study
  MIN_LAUNCH_S=${FIRST_LAUNCH_S:-270} TRIALS=1 DEADLINE=$(left) STUDY_TIMEOUT=60 \
    bash "$here/run_study.sh" "$archive" "$state" "$out" || exit $?
  state=$out
fi
# the queue goes into the study's SQLite file inside the state, then the state is packed again
work=$(mktemp -d)
if [[ -f $state/study-state.tar.xz ]]; then tar xJf "$state/study-state.tar.xz" -C "$work" || exit 3; fi
db=$(ls "$work"/*/"$STUDY".db 2>/dev/null) || { rm -rf "$work"; echo "paired_study: no study $STUDY yet (no launch fitted); run this command again" >&2; exit 75; }
# archive_env.sh writes env.sh, which a carried archive folder lacks until run_study.sh ran
(dir=$(cd "$archive" && pwd); TARGET=${TARGET:-8b-standalone}
 say() { echo "[paired_study] $*"; }; source "$here/archive_env.sh"
 python3 "$here/queue_trials.py" "sqlite:///$db" "$STUDY" "$TOTAL" $CONFIGS) | tee -a "$out/console.log" || exit 3
tar cJf "$out/study-state.tar.xz" -C "$work" "$(basename "$(dirname "$db")")" && rm -rf "$work"
# a trial is started only while one launch (about 120 s on a warm H200) still fits
(( $(left) > 240 )) || { echo "paired_study: $(left) s left, too few for a launch; the queue is in $out/study-state.tar.xz"; exit 0; }
rest=$(left)  # once: DEADLINE=$(left) before STUDY_TIMEOUT would change what left() reads
TRIALS=$TOTAL DEADLINE=$rest STUDY_TIMEOUT=$((rest - 180)) bash "$here/run_study.sh" "$archive" "$out" "$out"
