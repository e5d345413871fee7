#!/usr/bin/env bash
# Create ./.venv with Python 3.11 and install proton-broker into it (with the extras given
# as arguments, e.g. "test"). Installs Debian's python3-venv first when venv is missing, and
# gcc and python3-dev when there is no compiler or no Python headers (for the compiled
# codec walks, see setup.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
if ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -c "import ensurepip" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  else
    echo "python3-venv is missing: sudo apt-get install python3-venv" >&2; exit 1
  fi
fi
# A C compiler and the Python headers build the codec's compiled walks (setup.py); without
# them they are skipped and the codec runs the same walks in Python.
include=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if ! command -v cc >/dev/null 2>&1 || [ ! -f "$include/Python.h" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      -o DPkg::Lock::Timeout=300 gcc python3-dev >/dev/null
  else
    echo "no C compiler or Python headers: the codec's walks will run in Python" \
      "(sudo apt-get install gcc python3-dev, then run this again, to build it)" >&2
  fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
extras=${1:-}
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install -q -e ".[$extras]"
else
  .venv/bin/python -m pip install -q -e .
fi
bash scripts/setup-sasl.sh
