# The `recover` binary a script measures, in one place for every script: RECOVER_BIN when
# set (a build from another commit, or this tree's without rebuilding it on a busy
# machine), else this tree's, built first. Usage: `. scripts/lib/recover_bin.sh` then
# `BIN=$(recover_bin)` (release) or `BIN=$(recover_bin debug)`.
recover_bin() {
  if [ -n "${RECOVER_BIN:-}" ]; then
    [ -x "$RECOVER_BIN" ] || { echo "RECOVER_BIN=$RECOVER_BIN is not an executable" >&2; exit 2; }
    realpath "$RECOVER_BIN"
    return
  fi
  if [ "${1:-release}" = release ]; then
    cargo build --release --locked --quiet --bin recover >&2
    realpath target/release/recover
  else
    cargo build --locked --quiet --bin recover >&2
    realpath target/debug/recover
  fi
}
