#!/usr/bin/env bash
# Runs every cargo-fuzz target for a while (default 60 s each; `scripts/fuzz.sh 10` for 10 s).
# Needs the nightly toolchain (rustup) and cargo-fuzz, which this script installs from crates.io.
# The same fuzz bodies also run on stable under `cargo test` (proptest with arbitrary bytes), so
# the regular test command covers every parser even without this script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --quiet --locked cargo-fuzz
cd fuzz
for target in $(cargo +nightly fuzz list); do
  echo "fuzz: $target for ${seconds}s"
  # A target with a dictionary (dict/<target>.dict) starts from its keys.
  dict=()
  [ -f "dict/$target.dict" ] && dict=(-dict="dict/$target.dict")
  cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 ${dict[@]+"${dict[@]}"}
done
