#!/usr/bin/env bash
# Create a virtual environment holding the real sglang (0.5.23, installed --no-deps) plus
# the import closure that its argument resolver and CLI parser need on a CPU-only host.
#
#   tools/install_sglang_cpu.sh [VENV_DIR]      (default: .sglang-venv)
#
# Idempotent: when VENV_DIR already imports sglang.srt.server_args at the pinned version
# and its stamp matches this script's requirement list, nothing is installed.
# Prints the venv's python (absolute path) as its last line on stdout; .ci/run does
#   bash tools/install_sglang_cpu.sh .sglang-venv
#   export AUTOSPEC_SGLANG_PYTHON="$PWD/.sglang-venv/bin/python"
#
# The closure is the one listed in shared/DESIGN.md ("sglang 0.5.23's own resolver runs
# without a GPU"), plus `datasets` for SGLang's benchmark client (`python -m
# sglang.benchmark.serving` imports it at start-up; tests/sglang_real/test_bench_serving.py):
# about 15 s and 270 MB more (pyarrow, pandas). python-dateutil is pinned below 3 because
# sglang 0.5.23 requires that and pandas would otherwise pull 4.x. torch==2.14.1/torchvision==0.29.1 are a CUDA build (~5.5 GB) that pip
# takes from this machine's disk; /etc/xdg/pip caps torch at those releases.
# Environment: PYTHON (base interpreter, default python3; the torch wheels on disk are for
# CPython 3.11, another Python downloads several GB), SGLANG_VERSION (default 0.5.23; the
# closure was only checked for 0.5.23).
set -euo pipefail

VENV_DIR="${1:-.sglang-venv}"
PYTHON="${PYTHON:-python3}"
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"

# Pinned so CI does not drift: where sglang 0.5.23 pins a release (torch, transformers,
# tokenizers, sentencepiece, compressed-tensors, apache-tvm-ffi) its pin, else the release
# first installed and tested here (2026-11-29). Transitive dependencies float.
CLOSURE=(
    torch==2.14.1 torchvision==0.29.1 transformers==5.19.0 tokenizers==0.23.2
    sentencepiece==0.2.1 compressed-tensors==0.18.0 apache-tvm-ffi==0.1.11
    msgspec==0.23.0 numpy==2.4.6 orjson==3.13.0 psutil==7.2.2 pybase64==1.5.1
    requests==2.34.2 packaging==26.4 pillow==13.0.0 fastapi==0.165.0 pydantic==2.14.4
    pyzmq==27.3.0 tqdm==4.70.1 ipython==9.18.1 aiohttp==3.14.5 dill==0.4.1 gguf==0.19.0
    datasets==5.2.0 python-dateutil==2.9.0.post0
)
STAMP_TEXT="sglang==${SGLANG_VERSION} --no-deps; ${CLOSURE[*]}"
STAMP_FILE="${VENV_DIR}/.autospec-sglang-stamp"
VENV_PY="${VENV_DIR}/bin/python"

already_installed() {
    [[ -x "${VENV_PY}" && -f "${STAMP_FILE}" ]] || return 1
    [[ "$(cat "${STAMP_FILE}")" == "${STAMP_TEXT}" ]] || return 1
    "${VENV_PY}" - "${SGLANG_VERSION}" <<'PY' >/dev/null 2>&1
import sys, importlib.metadata as md
assert md.version("sglang") == sys.argv[1]
import sglang.srt.server_args  # the resolver and parser autospec uses
PY
}

pip_install() {
    # Noise here: pip's notes about this machine's local find-links folders, and its list
    # of sglang's requirements that --no-deps leaves out on purpose. pip's status is kept.
    "${VENV_PY}" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | { grep -v -e "^WARNING: Location 'file:" -e "^sglang [0-9.]* requires " \
                    -e "^ERROR: pip's dependency resolver does not currently take" || true; } >&2
}

start=$(date +%s)
if already_installed; then
    echo "install_sglang_cpu: sglang ${SGLANG_VERSION} already installed in ${VENV_DIR}" >&2
else
    echo "install_sglang_cpu: installing sglang ${SGLANG_VERSION} into ${VENV_DIR}" >&2
    rm -f "${STAMP_FILE}"
    [[ -x "${VENV_PY}" ]] || "${PYTHON}" -m venv "${VENV_DIR}"
    pip_install --no-deps "sglang==${SGLANG_VERSION}"
    pip_install "${CLOSURE[@]}"
    if ! import_error=$("${VENV_PY}" -c "import sglang.srt.server_args" 2>&1); then
        echo "install_sglang_cpu: sglang installed but 'import sglang.srt.server_args' fails:" >&2
        echo "${import_error}" | tail -n 5 >&2
        exit 1
    fi
    printf '%s' "${STAMP_TEXT}" > "${STAMP_FILE}"
    echo "install_sglang_cpu: done in $(( $(date +%s) - start )) s," \
        "$(du -sm "${VENV_DIR}" | cut -f1) MB in ${VENV_DIR}" >&2
fi
cd "${VENV_DIR}" && echo "$(pwd)/bin/python"
