# Sourced by run_study.sh and capacity_compare.sh: the archive unpacked once per machine, the
# models (make_models.py; for TARGET=8b-standalone the trained pair, build_pair.py, cached on a
# warm machine by its pair.json), and env.sh exactly as the archive's serve.sh writes it.
# Expects: dir (the archive), here (this folder), TARGET, out (where pair.json is copied) and a
# function say; sets model (the target's folder under /tmp/sgmodels) where it is unset.
case $TARGET in tiny) : "${model:=m}" ;; 8b) : "${model:=m8b}" ;; *) : "${model:=t8b}" ;; esac
[[ -d /tmp/sgsite/site ]] || { mkdir -p /tmp/sgsite && tar xJf "$dir/site.tar.xz" -C /tmp/sgsite; } || exit 3
[[ -f /tmp/sgmodels/m/config.json ]] || python3 "$dir/make_models.py" /tmp/sgmodels >/dev/null || exit 3
if [[ $TARGET == 8b-standalone ]]; then  # the trained pair (tiny_llama.py beside build_pair.py)
  pair=$here/build_pair.py; [[ -f $pair ]] || pair=$dir/build_pair.py
  CUBLAS_WORKSPACE_CONFIG=:4096:8 python3 "$pair" /tmp/sgmodels || exit 3
  cp /tmp/sgmodels/pair.json "$out/" 2>/dev/null
fi
[[ -f /tmp/sgmodels/$model/config.json ]] || { say "make_models.py of $dir wrote no /tmp/sgmodels/$model; rebuild the archive with tools/gpu/build_archive.sh"; exit 3; }
sed -n '/<<ENV$/,/^ENV$/{/<<ENV$/d;/^ENV$/d;p}' "$dir/serve.sh" | sed "s#\$dir#$dir#g" >"$dir/env.sh"
grep -q SGLANG_BASE_ARGS "$dir/env.sh" || { say "no env.sh block found in $dir/serve.sh"; exit 3; }
source "$dir/env.sh"
# serve.sh's base flags name the tiny target; the check below compares the selected one's
SGLANG_BASE_ARGS=${SGLANG_BASE_ARGS/--model-path \/tmp\/sgmodels\/m /--model-path /tmp/sgmodels/$model }
[[ -n ${AUTOSPEC_SRC:-} ]] && export PYTHONPATH=$AUTOSPEC_SRC:$PYTHONPATH
