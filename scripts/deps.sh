# Sourced by quickstart.sh and test.sh: installs the Debian packages coopsim needs.
COOPSIM_PACKAGES="g++ meson ninja-build pkg-config libfmt-dev nlohmann-json3-dev libcli11-dev catch2 zlib1g-dev python3 python3-dev pybind11-dev python3-matplotlib python3-venv python3-setuptools python3-wheel zsh groff-base"

# The CUDA backend (Meson feature `cuda`, auto) needs nvcc on PATH (Meson 1.0 looks nowhere else):
# add the toolkit's bin directory when nvcc is installed but not on PATH.
if ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then
      export PATH="$PATH:$d/bin"
      break
    fi
  done
fi

coopsim_install_deps() {
  local missing=()
  for p in $COOPSIM_PACKAGES ${COOPSIM_EXTRA_PACKAGES:-} "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "coopsim: installing missing packages: ${missing[*]}" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo="sudo"
    else
      echo "coopsim: these packages are missing and you are not root and have no sudo:" >&2
      echo "  apt-get install -y ${missing[*]}" >&2
      echo "coopsim: ask an administrator to run that line, then run this script again." >&2
      return 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    $sudo apt-get update >/dev/null 2>&1 &&
      $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
  } || {
    echo "coopsim: apt-get could not install: ${missing[*]}" >&2
    return 1
  }
}

# PyTorch 2.x from PyPI (the recorder's main target; Debian ships 1.13) in a virtual environment
# made once per machine, outside the checkout: ${COOPSIM_TORCH2_VENV:-~/.cache/coopsim/torch2-venv}.
# The CUDA wheel runs on the CPU (no GPU needed); with torchvision, transformers, pandas and pytest
# it is several GB, so it is installed only when missing. Sets COOPSIM_TORCH2_PYTHON on success.
coopsim_torch2_venv() {
  local venv="${COOPSIM_TORCH2_VENV:-$HOME/.cache/coopsim/torch2-venv}"
  local check="import torch, torchvision, transformers, pandas, pytest; assert int(torch.__version__.split('.')[0]) >= 2"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "coopsim: installing PyTorch 2.x from PyPI into $venv (once per machine)" >&2
    coopsim_install_deps python3-venv || return 1
    /usr/bin/python3 -m venv "$venv" &&
      "$venv/bin/python" -m pip install -q --upgrade pip &&
      "$venv/bin/python" -m pip install -q torch torchvision transformers pandas pytest || {
        echo "coopsim: pip could not install torch 2.x into $venv" >&2
        return 1
      }
  fi
  COOPSIM_TORCH2_PYTHON="$venv/bin/python"
  export COOPSIM_TORCH2_PYTHON
}
