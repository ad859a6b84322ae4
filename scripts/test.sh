#!/usr/bin/env bash
# One command: install what is needed, then run every test. Unit, property and integration
# tests (real daemons on loopback sockets, real SQLite files, real iSCSI sessions, Debian's
# libiscsi tools for interop) all run under `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CARGO_TERM_COLOR=never
# The integration tests spawn the real `tessera` binary; build it first (same profile).
cargo build --quiet -p tessera-cli
# Not under -e: a failing run must still reach the summary below.
set +e
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-output.txt
status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' target/test-output.txt | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' target/test-output.txt | awk '{s+=$1} END {print s+0}')
echo "tessera: ${passed} passed, ${failed} failed"
exit "$status"
