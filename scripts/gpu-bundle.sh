#!/usr/bin/env bash
# Packs what a GPU machine that cannot install this build's dependencies needs to run
# scripts/gpu-check.sh --bin DIR: the two executables, stripped, and the shared libraries
# they load from this machine's system (the tokenizer's PCRE2 and ICU, OpenSSL, Google
# Benchmark, ...), but neither the C and C++ runtimes nor LibTorch's, CUDA's and NCCL's
# libraries, which gpu-check.sh takes from the GPU machine's own torch (it must be the
# torch version requirements.txt pins; docs/gpu.md).
#
# Usage: scripts/gpu-bundle.sh DIR [BUILD_DIR]   (BUILD_DIR defaults to <repo>/build)
# Writes DIR and DIR.tar.xz (unpack with: mkdir BIN && tar xJf DIR.tar.xz -C BIN).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:?usage: scripts/gpu-bundle.sh DIR [BUILD_DIR]}"
BUILD="${2:-$REPO/build}"
mkdir -p "$DIR/lib"

for exe in sparsebalance tests/sb_tests_cuda; do
  [ -x "$BUILD/$exe" ] || { echo "gpu-bundle: $BUILD/$exe is missing; build it first (scripts/lib.sh sb_build $(basename "$exe"))" >&2; exit 1; }
  strip -o "$DIR/$(basename "$exe")" "$BUILD/$exe"
done

# Libraries resolved outside the torch wheel's folders and outside the C/C++ runtime.
# The runtime stays the GPU machine's own: a newer glibc and libstdc++ run code built
# against older ones, not the reverse.
ldd "$BUILD/sparsebalance" "$BUILD/tests/sb_tests_cuda" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(torch|nvidia)/|/lib(c|m|dl|rt|pthread|util|gcc_s|stdc\+\+|cuda|resolv)\.so|/ld-linux' |
  while read -r lib; do cp -L "$lib" "$DIR/lib/"; done

# One compressed file for the device tool's carry (64 MiB with the working tree; ICU's
# data alone is 31 MB, a fifth of that compressed).
tar cf - -C "$DIR" . | xz -T0 -6 >"$DIR.tar.xz"
du -sh "$DIR" "$DIR.tar.xz" | sed 's/^/gpu-bundle: /'
