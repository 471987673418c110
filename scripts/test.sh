#!/usr/bin/env bash
# The test command from the README. Installs what the tests need on a fresh Debian
# machine (when run as root and it is missing), builds once, runs the whole suite.
#
#   ./scripts/test.sh            the full suite (what CI runs)
#   ./scripts/test.sh --quick    the quick lane: no end-to-end system, no wall-clock test
#                                (.config/nextest.toml, profile `quick`)
# Any other arguments go to `cargo nextest run` (a filter, say: -E 'test(/^gate_proxy::/)').
set -euo pipefail
cd "$(dirname "$0")/.."

profile=()
if [ "${1:-}" = "--quick" ]; then
  shift
  profile=(--profile quick)
fi

source scripts/lib/install_missing.sh
need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v amtool >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)
# The man page test renders the generated pages with groff (Debian: groff-base).
command -v groff >/dev/null 2>&1 || need_apt+=(groff-base)
install_missing ${need_apt[@]+"${need_apt[@]}"}

# The manifests are rendered with `kubectl kustomize` (kubectl is part of the machine image;
# Debian does not package it) and checked with kubernetes-validate --strict (PyPI).
if ! command -v kubectl >/dev/null 2>&1; then
  echo "missing: kubectl (renders manifests/ for the kube_manifests tests); install it from your Kubernetes distribution" >&2
  exit 2
fi
if ! python3 -m kubernetes_validate --version >/dev/null 2>&1; then
  echo "installing: kubernetes-validate (PyPI)" >&2
  python3 -m pip install --quiet kubernetes-validate
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo build --locked --all-targets
cargo nextest run --locked --no-fail-fast ${profile[@]+"${profile[@]}"} "$@"
