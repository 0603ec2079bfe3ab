#!/usr/bin/env bash
# Sets up a Debian 12 machine for trainc and builds it into build/ (Release, ccache, precompiled
# LibTorch header). Installs only the Debian packages that are missing (apt-get; sudo when not root).
#   scripts/setup.sh           what building and running trainc needs
#   scripts/setup.sh --tests   also what the test suite needs
# libopenblas0-openmp gives LibTorch an optimized BLAS (Debian's default is the reference BLAS,
# about 8x slower on the quickstart); dataset-fashion-mnist is the quickstart's data.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ccache libtorch-dev libyaml-cpp-dev libcli11-dev libspdlog-dev nlohmann-json3-dev
          libxxhash-dev zlib1g-dev libgloo-dev libopenblas0-openmp dataset-fashion-mnist)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(catch2 python3-torch)  # python3-torch writes the TorchScript files the tests train
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

tests=OFF
[[ "${1:-}" == "--tests" ]] && tests=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTRAINC_BUILD_TESTS=$tests >/dev/null
cmake --build build -j"$(nproc)"
