#!/usr/bin/env bash
# Create a virtual environment holding the real sglang (0.5.23, installed --no-deps) plus
# the import closure that its argument resolver and CLI parser need on a CPU-only host.
#
#   tools/install_sglang_cpu.sh [VENV_DIR]      (default: .sglang-venv)
#
# Idempotent: when VENV_DIR already imports sglang.srt.server_args at the pinned version
# and its stamp matches this script's requirement list, nothing is installed.
# Prints the venv's python path as its last line, so callers can do
#   export AUTOSPEC_SGLANG_PYTHON="$(tools/install_sglang_cpu.sh .sglang-venv | tail -n1)"
#
# The closure is the one listed in shared/DESIGN.md ("sglang 0.5.23's own resolver runs
# without a GPU"). torch==2.14.1/torchvision==0.29.1 are a CUDA build (~5.5 GB) that pip
# takes from this machine's disk; /etc/xdg/pip caps torch at those releases.
# Environment: PYTHON (base interpreter, default python3), SGLANG_VERSION (default 0.5.23).
set -euo pipefail

VENV_DIR="${1:-.sglang-venv}"
PYTHON="${PYTHON:-python3}"
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"

CLOSURE=(
    "torch==2.14.1" "torchvision==0.29.1"
    msgspec numpy orjson psutil pybase64 requests packaging pillow fastapi pydantic
    pyzmq tqdm ipython aiohttp transformers dill "apache-tvm-ffi==0.1.11"
    sentencepiece compressed-tensors gguf
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

start=$(date +%s)
if already_installed; then
    echo "install_sglang_cpu: sglang ${SGLANG_VERSION} already installed in ${VENV_DIR}" >&2
else
    echo "install_sglang_cpu: installing sglang ${SGLANG_VERSION} into ${VENV_DIR}" >&2
    rm -f "${STAMP_FILE}"
    [[ -x "${VENV_PY}" ]] || "${PYTHON}" -m venv "${VENV_DIR}"
    "${VENV_PY}" -m pip install --quiet --disable-pip-version-check \
        --no-deps "sglang==${SGLANG_VERSION}"
    "${VENV_PY}" -m pip install --quiet --disable-pip-version-check "${CLOSURE[@]}"
    if ! already_installed_check_output=$("${VENV_PY}" -c "import sglang.srt.server_args" 2>&1); then
        echo "install_sglang_cpu: sglang installed but 'import sglang.srt.server_args' fails:" >&2
        echo "${already_installed_check_output}" | tail -n 5 >&2
        exit 1
    fi
    printf '%s' "${STAMP_TEXT}" > "${STAMP_FILE}"
    echo "install_sglang_cpu: done in $(( $(date +%s) - start )) s," \
        "$(du -sm "${VENV_DIR}" | cut -f1) MB in ${VENV_DIR}" >&2
fi
cd "${VENV_DIR}" && echo "$(pwd)/bin/python"
