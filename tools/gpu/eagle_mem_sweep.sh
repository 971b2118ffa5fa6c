#!/bin/bash
# EAGLE on the 8B-shaped target at several --mem-fraction-static values, down to where it
# fails (docs/validation/2026-12-03-h200-8b-eagle-memory-model.md): a default study of real-8b-eagle-mem (every value it
# decides to launch), then one `autospec bench` launch below SGLang's minimum so the failure
# message of the installed SGLang is seen even when the study's memory model skipped it.
#
#   bash tools/gpu/eagle_mem_sweep.sh ARCHIVE_DIR OUT_DIR [FAIL_MEM]   (FAIL_MEM default 0.09)
set -u
dir=$1; out=$2; fail_mem=${3:-0.09}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
TARGET=8b SPACE=$repo/src/autospec/search_spaces/real-8b-eagle-mem.toml STUDY=real-8b-eagle-mem \
  TRIALS=${TRIALS:-5} STUDY_TIMEOUT=${STUDY_TIMEOUT:-380} DEADLINE=${DEADLINE:-470} \
  bash "$here/run_study.sh" "$dir" "$out/state-in" "$out"
source "$dir/env.sh"
[[ -n ${AUTOSPEC_SRC:-} ]] && export PYTHONPATH=$AUTOSPEC_SRC:$PYTHONPATH
flags=(model_path=/tmp/sgmodels/m8b load_format=dummy attention_backend=triton sampling_backend=pytorch
       grammar_backend=none speculative_algorithm=EAGLE speculative_draft_model_path=/tmp/sgmodels/d8b
       speculative_num_steps=3 speculative_eagle_topk=1 speculative_num_draft_tokens=4
       cuda_graph_max_bs_decode=32 mem_fraction_static=$fail_mem)
args=(); for f in "${flags[@]}"; do args+=(--flag "$f"); done
echo "[eagle_mem_sweep] a launch at mem_fraction_static=$fail_mem"
timeout -k 10 120 python3 -m autospec.cli.main bench --server-command "python3 -m sglang.launch_server" \
  "${args[@]}" --server-log "$out/fail-$fail_mem.log" --ready-timeout 100 --concurrency 1 --num-requests 1 \
  >"$out/fail-$fail_mem.txt" 2>&1
echo "[eagle_mem_sweep] bench exit $?"; tail -5 "$out/fail-$fail_mem.txt"
