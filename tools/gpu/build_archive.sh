#!/bin/bash
# Build the real-SGLang archive for a GPU machine without network, with autospec added.
#
#   tools/gpu/build_archive.sh [OUT_DIR] [REAL_SGLANG_TOOLS]
#     OUT_DIR            default .real-sglang/archive (gitignored)
#     REAL_SGLANG_TOOLS  default ../shared/tools/real-sglang (build_bundle.sh and its helpers)
#
# Needs PyPI (pip download) and python3 here. Builds an autospec wheel from this checkout,
# hands build_bundle.sh requirements-autospec.txt plus that wheel as its extra requirements,
# and copies tools/gpu/{run_study.sh,nvml_watch.py,export_best.py,trials_table.py} and the
# search spaces run_study.sh selects (real-tiny-eagle for TARGET=tiny, real-8b-ngram for
# TARGET=8b) beside site.tar.xz, so OUT_DIR alone is all the GPU machine needs. The
# project's tools/gpu/make_models.py replaces the bundle's make_models.py: the same tiny
# target and draft (m, d) and the 8B-shaped ones beside them (m8b, d8b), which serve.sh and
# run_study.sh then write to /tmp/sgmodels. Prints the archive's size and the commit built.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$repo/.real-sglang/archive}
tools=${2:-$repo/../shared/tools/real-sglang}
[[ -x $tools/build_bundle.sh ]] || { echo "build_archive: no build_bundle.sh in $tools; pass the real-sglang tools folder as the second argument" >&2; exit 2; }
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 -m pip wheel -q --no-deps --no-build-isolation -w "$work/wheel" "$repo" 2>/dev/null \
  || python3 -m pip wheel -q --no-deps -w "$work/wheel" "$repo"
wheel=$(ls "$work"/wheel/autospec-*.whl)
{ cat "$repo/tools/gpu/requirements-autospec.txt"; echo "$wheel"; } >"$work/extra.txt"
bash "$tools/build_bundle.sh" "$out" "$work/extra.txt"
cp "$repo"/tools/gpu/{run_study.sh,nvml_watch.py,export_best.py,trials_table.py,make_models.py} "$out/"
# the trained pair of TARGET=8b-standalone and its checks
cp "$repo"/tools/gpu/{build_pair.py,tiny_llama.py,check_exact.py,pair_check.sh} "$out/"
# the wheel carries no search spaces
cp "$repo"/src/autospec/search_spaces/{real-tiny-eagle,real-8b-ngram,real-8b-eagle-mem,real-8b-standalone,real-8b-standalone-sampled}.toml "$out/"
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$repo" status --porcelain -- src 2>/dev/null | wc -l)
echo "autospec $(basename "$wheel") from commit $commit ($dirty changed files under src/)" | tee "$out/BUILT_FROM"
