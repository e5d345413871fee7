#!/bin/sh
# Build bench/build/loadgen from bench/loadgen.c (installs Debian's Proton C headers if missing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/build"
mkdir -p "$out"

if [ ! -e /usr/include/proton/proactor.h ]; then
    echo "installing libqpid-proton11-dev (Proton C, with the proactor)" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get install -y libqpid-proton11-dev pkg-config >&2
fi

# Newer packagings split the library into -core and -proactor; Debian's 0.37 ships one
# libqpid-proton that holds both.
if pkg-config --exists libqpid-proton-core libqpid-proton-proactor 2>/dev/null; then
    flags=$(pkg-config --cflags --libs libqpid-proton-core libqpid-proton-proactor)
elif pkg-config --exists libqpid-proton 2>/dev/null; then
    flags=$(pkg-config --cflags --libs libqpid-proton)
else
    flags="-lqpid-proton"
fi

if [ ! -x "$out/loadgen" ] || [ "$here/loadgen.c" -nt "$out/loadgen" ]; then
    # shellcheck disable=SC2086
    ${CC:-cc} -O2 -Wall -Wextra -Wno-unused-parameter -o "$out/loadgen" "$here/loadgen.c" $flags
fi
echo "$out/loadgen"
