#!/bin/bash
# Broker instructions per message for loadgen workloads, counted under valgrind (callgrind).
#
# Wall-clock and CPU figures on a shared machine drift by 10-25% from run to run; instruction
# counts do not, so they show changes of a few percent. They leave out cache misses and the
# like, so report CPU ratios from run.py too. Needs valgrind (Debian: apt-get install valgrind).
#
# usage: bench/instructions.sh COUNT "LOADGEN FLAGS" ["LOADGEN FLAGS" ...]
#   e.g. bench/instructions.sh 20000 "-C 10" "-C 10 -g 10000"
# Each workload runs scenario a against a fresh broker (PYTHON, default python3, with this
# checkout's package); the broker's start-up and shutdown are measured once without
# messages and subtracted. Takes about a minute per 20,000 messages.
#
# CACHE=1 simulates the caches too (callgrind --cache-sim=yes, the host's cache sizes; about
# twice as slow) and adds, per message, the misses of the first-level instruction cache and
# of the last-level cache (reads and writes). On this broker the instruction-cache misses
# follow its CPU where instructions do not: every message runs more code than that cache
# holds, so code a message runs that others do not costs its misses as well as its
# instructions (see docs/performance.md).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
PY=${PYTHON:-python3}
case $PY in  # a path (.venv/bin/python) made absolute: the broker runs in another directory
  */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;;
esac
COUNT=$1
shift
"$HERE/build.sh" >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

broker_instructions() {  # $1: messages (0: start and stop only), $2: loadgen flags
  local port=$((20000 + RANDOM % 20000)) log="$WORK/broker.log"
  : >"$log"
  (cd "$WORK" && PYTHONSAFEPATH=1 PYTHONPATH="$REPO" valgrind --tool=callgrind \
    ${CACHE:+--cache-sim=yes} --callgrind-out-file="$WORK/cg.out" "$PY" -m proton_broker --config "$REPO/conf/broker.yaml" \
    --port "$port" --data-dir "$WORK/data-$port" >"$log" 2>&1) &
  local vg=$!
  for _ in $(seq 600); do grep -q listening "$log" && break; sleep 0.5; done
  if [ "$1" != 0 ]; then
    # shellcheck disable=SC2086
    "$HERE/build/loadgen" a -H "127.0.0.1:$port" -n "$1" -q bench -t 900 $2 >/dev/null
  fi
  pkill -INT -f -- "--port $port" || true
  wait "$vg" || true
  # Ir, or with CACHE: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
  awk '/^(summary|totals):/ {$1 = ""; print; exit}' "$WORK/cg.out"
}

idle=$(broker_instructions 0 "")
for flags in "$@"; do
  total=$(broker_instructions "$COUNT" "$flags")
  echo "$idle" "$total" | awk -v flags="$flags" -v n="$COUNT" '{
    half = NF / 2
    line = sprintf("[%s] %d instructions/message", flags, ($(half + 1) - $1) / n)
    if (half == 9)  # CACHE: I1mr, and ILmr + DLmr + DLmw
      line = line sprintf(", %.0f instruction-cache misses, %.1f last-level misses",
        ($(half + 4) - $4) / n, ($(half + 7) + $(half + 8) + $(half + 9) - $7 - $8 - $9) / n)
    print line " (broker, " n " messages)"
  }'
done
