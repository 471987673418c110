#!/usr/bin/env bash
# Instructions per request by function, from two callgrind profiles of the same gate that
# answered N and 2N requests (scripts/bench-gate.sh keeps them): each function's
# inclusive count in the second minus the first, over N, so start-up and shutdown cancel.
#
# usage: scripts/lib/callgrind_per_request.sh PROFILE_N PROFILE_2N N [TOP=30]
set -euo pipefail
a=$1 b=$2 n=$3 top=${4:-30}
incl() { callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
  awk '/^ *[0-9,]+ \([ 0-9.]+%\) / { c = $1; gsub(",", "", c); $1 = ""; $2 = ""; sub(/^ +/, ""); print c "\t" $0 }'; }
join -t $'\t' -1 2 -2 2 <(incl "$a" | sort -t $'\t' -k2) <(incl "$b" | sort -t $'\t' -k2) |
  awk -F'\t' -v n="$n" '{ d = ($3 - $2) / n; if (d >= 1) printf "%8.0f  %s\n", d, $1 }' |
  sort -rn | head -n "$top"
