#!/bin/bash
# `autospec capacity --compare` on the GPU machine, against a study's SQLite file (issue 39).
#
#   DB=tests/fixtures/real_8b_standalone_study.db.gz STUDY=real-8b-standalone TARGET=8b-standalone \
#     CAPACITY_ARGS="--compare latency,no_speculation --tpot-p99-ms 8" bash capacity_compare.sh ARCHIVE_DIR OUT_DIR
#
# DB (gzipped or not) is copied to a scratch folder; capacity starts each configuration with its
# recorded command (the models under /tmp/sgmodels are built first, as run_study.sh does) and
# writes its curves beside that copy (STUDY-capacity/); OUT_DIR gets capacity.txt (the table
# side by side), capacity.json (the curves) and capacity-files.tar.xz (every file capacity
# wrote). DEADLINE (seconds) bounds the run (capacity's --timeout).
set -u
t0=$SECONDS
DEADLINE=${DEADLINE:-570}; TARGET=${TARGET:-8b-standalone}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
exec > >(tee -a "$out/console.log") 2>&1
say() { echo "[capacity_compare +$((SECONDS - t0))s] $*"; }
source "$here/archive_env.sh"
work=$(mktemp -d)
case $DB in *.gz) gunzip -c "$DB" >"$work/$STUDY.db" ;; *) cp "$DB" "$work/$STUDY.db" ;; esac
left=$(( DEADLINE - (SECONDS - t0) - 30 ))
say "capacity for at most ${left}s: ${CAPACITY_ARGS:-}"
python3 -m autospec.cli.main capacity --study "$STUDY" --storage "sqlite:///$work/$STUDY.db" \
  --timeout "${left}s" ${CAPACITY_ARGS:-} | tee "$out/capacity.txt"
say "capacity exit ${PIPESTATUS[0]}"
cp "$work/$STUDY-capacity/compare.json" "$out/capacity.json" 2>/dev/null
tar cJf "$out/capacity-files.tar.xz" -C "$work" "$STUDY-capacity"
