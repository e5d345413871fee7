#!/usr/bin/env bash
# Install and build what the interop tests need, skipping whatever is already done:
#   1. Debian's Proton C and C++ 0.37 (libqpid-proton11-dev, libqpid-proton-cpp12-dev), the
#      Proton examples (libqpid-proton11-dev-examples: C, C++ and Python sources),
#      nlohmann-json3-dev and g++;
#   2. rhea, rhea-promise and amqp10, pinned by interop/node/package-lock.json, into
#      interop/node/node_modules;
#   3. the Proton C++ client, interop/cpp/*.cpp -> interop/build/, when a source is newer;
#   4. Proton's own C and C++ example programs, built as shipped from
#      /usr/share/proton/examples into interop/build/examples/ (nothing of them is kept here).
set -euo pipefail
cd "$(dirname "$0")"

# 1. Debian packages
missing=()
for pkg in libqpid-proton11-dev libqpid-proton-cpp12-dev libqpid-proton11-dev-examples \
           nlohmann-json3-dev g++ pkg-config nodejs npm; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$pkg")
done
# Node.js may come from elsewhere than Debian: accept any node and npm on the PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for pkg in "${missing[@]}"; do
    [[ $pkg == nodejs || $pkg == npm ]] || filtered+=("$pkg")
  done
  missing=("${filtered[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "interop/setup.sh: please install: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "interop/setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
fi

# 2. the Node.js clients (node_modules is rebuilt when the lock file changes)
if [ ! -f node/node_modules/.package-lock.json ] \
   || [ node/package-lock.json -nt node/node_modules/.package-lock.json ]; then
  (cd node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# 3. the C++ client. Debian's libqpid-proton-cpp.pc names libqpid-proton-core and
# libqpid-proton-proactor, which Debian does not ship, so fall back to the plain library.
if ! proton_flags=$(pkg-config --cflags --libs libqpid-proton-cpp 2>/dev/null); then
  proton_flags="-lqpid-proton-cpp"
fi
mkdir -p build
for src in cpp/*.cpp; do
  out="build/$(basename "$src" .cpp)"
  if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
    g++ -std=c++17 -O2 -Wall -pthread -o "$out" "$src" $proton_flags
  fi
done

# 4. Proton's example programs, compiled from Debian's example sources. Debian ships one
# libqpid-proton (core and proactor together) and no .pc files for the parts the examples'
# own Makefiles name, so link the libraries directly.
examples=/usr/share/proton/examples
mkdir -p build/examples/c build/examples/cpp
for name in send receive; do
  out="build/examples/c/$name"
  if [ ! -x "$out" ] || [ "$examples/c/$name.c" -nt "$out" ]; then
    gcc -O2 -o "$out" "$examples/c/$name.c" -lqpid-proton -lpthread
  fi
done
for name in simple_send simple_recv queue_browser selected_recv client server; do
  out="build/examples/cpp/$name"
  if [ ! -x "$out" ] || [ "$examples/cpp/$name.cpp" -nt "$out" ]; then
    g++ -std=c++17 -O1 -o "$out" "$examples/cpp/$name.cpp" -lqpid-proton-cpp -lpthread
  fi
done
