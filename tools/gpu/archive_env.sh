# Sourced by tools/gpu scripts on the GPU machine: unpack the archive once per machine, write
# the models (tools/gpu/make_models.py: the tiny and the 8B-shaped ones) to /tmp/sgmodels, and
# source env.sh exactly as the archive's serve.sh writes it; AUTOSPEC_SRC (a checkout's src/)
# then goes first on PYTHONPATH. Needs $dir (the archive folder) and $model (m, m8b, ...);
# returns non-zero with a one-line reason when something is missing.
[[ -d /tmp/sgsite/site ]] || { mkdir -p /tmp/sgsite && tar xJf "$dir/site.tar.xz" -C /tmp/sgsite; } || return 3
[[ -f /tmp/sgmodels/$model/config.json ]] || python3 "$dir/make_models.py" /tmp/sgmodels >/dev/null || return 3
[[ -f /tmp/sgmodels/$model/config.json ]] || { echo "make_models.py of $dir wrote no /tmp/sgmodels/$model; rebuild the archive with tools/gpu/build_archive.sh"; return 3; }
sed -n '/<<ENV$/,/^ENV$/{/<<ENV$/d;/^ENV$/d;p}' "$dir/serve.sh" | sed "s#\$dir#$dir#g" >"$dir/env.sh"
grep -q SGLANG_BASE_ARGS "$dir/env.sh" || { echo "no env.sh block found in $dir/serve.sh"; return 3; }
source "$dir/env.sh"
# serve.sh's base flags name the tiny target; callers compare or replace them with the selected one's
SGLANG_BASE_ARGS=${SGLANG_BASE_ARGS/--model-path \/tmp\/sgmodels\/m /--model-path /tmp/sgmodels/$model }
[[ -n ${AUTOSPEC_SRC:-} ]] && export PYTHONPATH=$AUTOSPEC_SRC:$PYTHONPATH
return 0
