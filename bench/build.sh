#!/bin/sh
# Build bench/build/loadgen from bench/loadgen.c (installs Debian's Proton C headers if missing),
# or, with the argument `example-broker`, bench/build/example-broker: Proton's own C example
# broker (examples/c/broker.c as Debian's libqpid-proton11-dev-examples ships it, installed if
# missing), which `bench/run.py --vs-example-broker` measures ours against. Prints the path.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/build"
examples=/usr/share/proton/examples/c
what=${1:-loadgen}
mkdir -p "$out"

install() {  # $1: what for, then the Debian packages
    echo "installing $1" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    shift
    $sudo apt-get install -y "$@" pkg-config >&2
}
if [ ! -e /usr/include/proton/proactor.h ]; then
    install "libqpid-proton11-dev (Proton C, with the proactor)" libqpid-proton11-dev
fi
if [ "$what" = example-broker ] && [ ! -e "$examples/broker.c" ]; then
    install "libqpid-proton11-dev-examples (Proton's C examples)" libqpid-proton11-dev-examples
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

case $what in
loadgen)
    if [ ! -x "$out/loadgen" ] || [ "$here/loadgen.c" -nt "$out/loadgen" ]; then
        # shellcheck disable=SC2086
        ${CC:-cc} -O2 -Wall -Wextra -Wno-unused-parameter -o "$out/loadgen" "$here/loadgen.c" $flags
    fi
    ;;
example-broker)
    if [ ! -x "$out/example-broker" ] || [ "$examples/broker.c" -nt "$out/example-broker" ]; then
        # shellcheck disable=SC2086
        ${CC:-cc} -O2 -w -I"$examples" -o "$out/example-broker" "$examples/broker.c" $flags -lpthread
    fi
    ;;
*)
    echo "usage: $0 [loadgen | example-broker]" >&2
    exit 2
    ;;
esac
echo "$out/$what"
