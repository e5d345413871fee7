#!/usr/bin/env bash
# Authentication with user names and passwords (PLAIN, SCRAM-SHA-*) needs Proton built
# against Cyrus SASL, as qpidd is; the python-qpid-proton wheel from the package index is
# built without it (SASL.extended() is False). This script, run by setup-venv.sh:
#   1. installs Debian's Cyrus SASL: the library and headers (libsasl2-dev), its mechanism
#      plugins (libsasl2-modules: PLAIN, SCRAM-SHA-1, SCRAM-SHA-256, ANONYMOUS), the user
#      database plugin (libsasl2-modules-db) and tools (sasl2-bin: saslpasswd2, which the
#      user commands of proton-broker-config run), with pkg-config and libssl-dev so that the
#      build keeps TLS;
#   2. rebuilds the python-qpid-proton version pinned in pyproject.toml from its source
#      distribution into ./.venv (about 20 seconds), unless the installed one already has
#      Cyrus SASL. Skips whatever is done already.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python

missing=()
for pkg in libsasl2-dev libsasl2-modules libsasl2-modules-db sasl2-bin pkg-config libssl-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/setup-sasl.sh: please install: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "scripts/setup-sasl.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
fi

has_cyrus() { "$py" -c "from proton import SASL, SSL; raise SystemExit(not (SASL.extended() and SSL.present()))"; }
if ! has_cyrus; then
  version=$(sed -n 's/.*"python-qpid-proton==\([0-9.]*\)".*/\1/p' pyproject.toml)
  echo "scripts/setup-sasl.sh: building python-qpid-proton $version against Cyrus SASL"
  "$py" -m pip install -q --no-cache-dir --force-reinstall --no-deps \
    --no-binary python-qpid-proton "python-qpid-proton==$version"
  has_cyrus || { echo "scripts/setup-sasl.sh: the build has no Cyrus SASL" >&2; exit 1; }
fi
