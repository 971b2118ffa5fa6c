#!/bin/bash
# A study fixture as the state run_study.sh continues from (a checkout keeps no state between
# sessions; the fixtures under tests/fixtures hold each GPU study, its queued trials included).
#
#   bash tools/gpu/fixture_state.sh tests/fixtures/NAME.db.gz STUDY STATE_DIR
#
# Writes STATE_DIR/study-state.tar.xz holding autospec-study/STUDY.db (run_study.sh's default
# STUDY_DIR is /tmp/autospec-study). Trial logs are not in a fixture; the records are.
set -euo pipefail
(( $# == 3 )) || { echo "usage: fixture_state.sh FIXTURE.db.gz STUDY STATE_DIR" >&2; exit 2; }
[[ -f $1 ]] || { echo "fixture_state: no fixture $1; name one of tests/fixtures/*.db.gz" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/autospec-study" "$3"
gunzip -c "$1" >"$work/autospec-study/$2.db"
python3 - "$work/autospec-study/$2.db" "$2" <<'PY'
import sqlite3, sys
names = [r[0] for r in sqlite3.connect(sys.argv[1]).execute("SELECT study_name FROM studies")]
if sys.argv[2] not in names:
    sys.exit(f"fixture_state: the fixture holds no study {sys.argv[2]!r}; it holds {', '.join(names)}")
PY
tar cJf "$work/state.tar.xz" -C "$work" autospec-study
mv "$work/state.tar.xz" "$3/study-state.tar.xz"   # whole or not at all
echo "fixture_state: $3/study-state.tar.xz ($2)"
