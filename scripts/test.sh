#!/usr/bin/env bash
# Sets up (scripts/setup.sh --tests), builds and runs the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
ctest --test-dir build -j"$(nproc)" --output-on-failure "$@"
