#!/usr/bin/env bash
# The test command from the README. Installs what the tests need on a fresh Debian
# machine (when run as root and it is missing), builds once, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/install_missing.sh
need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# The man page test renders the generated pages with groff (Debian: groff-base).
command -v groff >/dev/null 2>&1 || need_apt+=(groff-base)
install_missing ${need_apt[@]+"${need_apt[@]}"}

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo build --locked --all-targets
cargo nextest run --locked --no-fail-fast "$@"
