#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the embedded default job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/tools/tandem run
