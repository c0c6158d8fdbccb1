# Shared by the entry-point scripts (sourced, not run). Each function is idempotent:
# a second call on a machine that already has what it installs takes seconds.
#
#   sb_install_system_packages   Debian packages the build needs (apt-get, only if missing)
#   sb_setup_venv                the pinned Python environment, outside the clone,
#                                keyed by the hash of requirements.txt
#   sb_build                     configure (once) and build with CMake + Ninja + ccache
#
# Knobs (environment): SB_CACHE_DIR (default ~/.cache/sparsebalance), SB_PYTHON
# (default python3), SB_BUILD_DIR (default <repo>/build), SB_BUILD_TYPE (default
# Release), SB_CMAKE_ARGS (extra configure arguments, e.g. -DTorch_DIR=...).

set -euo pipefail

SB_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SB_CACHE_DIR="${SB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sparsebalance}"
SB_PYTHON="${SB_PYTHON:-python3}"
SB_BUILD_DIR="${SB_BUILD_DIR:-$SB_REPO/build}"
SB_BUILD_TYPE="${SB_BUILD_TYPE:-Release}"

sb_log() { printf '[sparsebalance] %s\n' "$*" >&2; }

# Debian packages: compilers and build tools, and the C++ libraries of docs/build.md.
# libgloo-dev supplies the Gloo headers that LibTorch's ProcessGroupGloo.hpp includes
# but the torch wheel does not ship (the wheel links Gloo statically). PCRE2 and ICU
# serve the tokenizer (Qwen2's split regex needs look-ahead; NFC). OpenSSL checksums
# checkpoints (SHA-256).
SB_DEBIAN_PACKAGES=(
  cmake ninja-build g++ ccache git pkg-config
  nlohmann-json3-dev libgloo-dev libcli11-dev libpcre2-dev libicu-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)

sb_install_system_packages() {
  local missing=()
  local pkg
  for pkg in "${SB_DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  sb_log "installing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      sb_log "error: missing packages ${missing[*]} and not root; run: apt-get install ${missing[*]}"
      return 1
    fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

# Sets SB_VENV to the ready environment. The marker file is written only after pip
# succeeded, so an interrupted setup is detected and redone, never taken as ready.
sb_setup_venv() {
  local hash
  hash="$(sha256sum "$SB_REPO/requirements.txt" | cut -c1-12)"
  SB_VENV="$SB_CACHE_DIR/venv-$hash"
  # The interpreter `sparsebalance report --plots` runs scripts/plot_results.py with.
  export SB_PLOT_PYTHON="${SB_PLOT_PYTHON:-$SB_VENV/bin/python}"
  if [ -x "$SB_VENV/bin/python" ] && [ -f "$SB_VENV/.sb-complete" ]; then
    return 0
  fi
  mkdir -p "$SB_CACHE_DIR"
  rm -rf "$SB_VENV"
  sb_log "creating Python environment $SB_VENV (torch 2.11.0 and the pinned requirements; once, a few minutes)"
  "$SB_PYTHON" -m venv "$SB_VENV"
  "$SB_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$SB_REPO/requirements.txt"
  touch "$SB_VENV/.sb-complete"
}

sb_torch_prefix() {
  "$SB_VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null
}

# Arguments, if any, are the CMake targets to build (default: all).
sb_build() {
  export CCACHE_BASEDIR="$SB_REPO"   # clones at different paths share the cache
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
  local prefix
  prefix="$(sb_torch_prefix)"
  mkdir -p "$SB_BUILD_DIR"
  # Configure when there is no build yet, or when the build type or the LibTorch
  # location changed (a new requirements.txt means a new environment).
  local cache="$SB_BUILD_DIR/CMakeCache.txt"
  if [ ! -f "$SB_BUILD_DIR/build.ninja" ] ||
     ! grep -qxF "CMAKE_BUILD_TYPE:STRING=$SB_BUILD_TYPE" "$cache" ||
     ! grep -qxF "CMAKE_PREFIX_PATH:UNINITIALIZED=$prefix" "$cache"; then
    rm -f "$cache"
    sb_log "configuring $SB_BUILD_DIR ($SB_BUILD_TYPE)"
    # shellcheck disable=SC2086
    cmake -S "$SB_REPO" -B "$SB_BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE="$SB_BUILD_TYPE" \
      -DCMAKE_PREFIX_PATH="$prefix" \
      ${SB_CMAKE_ARGS:-} >"$SB_BUILD_DIR/configure.log" 2>&1 || {
        cat "$SB_BUILD_DIR/configure.log" >&2
        sb_log "error: CMake configure failed (log above, also in $SB_BUILD_DIR/configure.log)"
        return 1
      }
  fi
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  sb_log "building ${*:-all targets} (ninja; ccache in ${CCACHE_DIR:-~/.cache/ccache})"
  cmake --build "$SB_BUILD_DIR" --parallel "${SB_BUILD_JOBS:-$(nproc)}" "${targets[@]}"
}

# Arguments, if any, are the CMake targets to build (default: all).
sb_prepare() {
  sb_install_system_packages
  sb_setup_venv
  sb_build "$@"
}
