#!/usr/bin/env bash
# Compiles the CUDA-only code (TRAINC_WITH_CUDA=1) on a machine without a GPU, syntax only, to find
# compile errors before a device call spends its time on a build that fails. It uses Debian's
# LibTorch headers (1.13, which include c10/cuda) and the CUDA toolkit's (CUDA_HOME, default
# /usr/local/cuda). Nothing links or runs. The GPU machine's LibTorch is 2.x: the errors naming
# the 2.x-only API the code calls (at::Context's allowBF16ReductionCuBLAS and its cuDNN attention
# switches, `libtorch2_only` below) are left out; a new call of such API is reported.
#
#   scripts/cuda_syntax_check.sh          every file with CUDA-only code
#   scripts/cuda_syntax_check.sh REV      those changed since REV (all of them when a header changed)
#
# Prints each file's errors; exits 1 when there are any, 2 when the headers are missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -f $cuda_home/include/cuda.h || ! -f /usr/include/c10/cuda/CUDAStream.h ]]; then
  echo "cuda_syntax_check: needs $cuda_home/include/cuda.h (set CUDA_HOME) and Debian's libtorch-dev" >&2
  exit 2
fi

# Files with CUDA-only code: the library's behind TRAINC_WITH_CUDA, and the CUDA tests.
mapfile -t all < <({ git grep -l "TRAINC_WITH_CUDA" -- 'lib/*.cpp' 'apps/*.cpp'; git ls-files 'tests/cuda/*.cpp'; } | sort -u)
files=("${all[@]}")
if [[ $# -gt 0 ]]; then
  mapfile -t changed < <(git diff --name-only "$1" -- lib apps tests)
  if ! printf '%s\n' "${changed[@]}" | grep -q '\.h$'; then
    files=()
    for file in "${all[@]}"; do printf '%s\n' "${changed[@]}" | grep -qx "$file" && files+=("$file"); done
  fi
fi
[[ ${#files[@]} -eq 0 ]] && { echo "cuda_syntax_check: no CUDA-only file changed"; exit 0; }

# The header LibTorch's CMake build writes and Debian's package leaves out.
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
mkdir -p "$stub/c10/cuda/impl"
echo "#define C10_CUDA_BUILD_SHARED_LIBS" > "$stub/c10/cuda/impl/cuda_cmake_macros.h"

# One word list (the quotes around the two string macros are part of their values).
# shellcheck disable=SC2089
export flags="-std=c++17 -fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 -DTRAINC_WITH_CUDA=1 -DTRAINC_VERSION=\"syntax\" -DTRAINC_BINARY=\"trainc\"
  -DSPDLOG_COMPILED_LIB -DSPDLOG_SHARED_LIB -DSPDLOG_FMT_EXTERNAL -DFMT_SHARED -Ilib -Itests -Ibuild/generated -I$stub
  -isystem /usr/include/torch/csrc/api/include -isystem $cuda_home/include"
export libtorch2_only="allowBF16ReductionCuBLAS|setSDPUseCuDNN|userEnabledCuDNNSDP"
check() {
  local errors
  # shellcheck disable=SC2086,SC2090
  errors=$(${CXX:-g++} $flags "$1" 2>&1 | grep -E "(error|fatal error):" | grep -vE "'($libtorch2_only)'|‘($libtorch2_only)’")
  if [[ -z $errors ]]; then echo "ok      $1"; else echo "errors  $1"; head -n 5 <<< "$errors"; fi
}
export -f check
# shellcheck disable=SC2016
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} bash -c 'check "$1"' _ {} | tee "$stub/report"
! grep -q "^errors" "$stub/report"
