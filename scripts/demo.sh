#!/usr/bin/env bash
# One command: install what is needed, build, and run the demonstration on a local target in a
# temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet -p tessera-cli
exec target/release/tessera demo "$@"
