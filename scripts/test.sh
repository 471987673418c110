#!/usr/bin/env bash
# The test command from the README. Installs what the tests need on a fresh Debian
# machine (when run as root and it is missing), builds once, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${need_apt[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "missing: ${need_apt[*]} (install with: sudo apt-get install ${need_apt[*]})" >&2
    exit 2
  fi
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo build --locked --all-targets
cargo nextest run --locked --no-fail-fast "$@"
