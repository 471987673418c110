# Sourced (not run) by the scripts that need system tools, so a fresh Debian machine and
# a developer's laptop get the same treatment: as root the missing packages are installed;
# otherwise the script says how to install them and exits 2 (bad environment, not a failure).
#
# usage: install_missing PACKAGE...   (no arguments: nothing is missing, nothing to do)
install_missing() {
  (($#)) || return 0
  if [ "$(id -u)" = 0 ]; then
    echo "installing: $*" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "missing: $* (install with: sudo apt-get install $*)" >&2
    exit 2
  fi
}
