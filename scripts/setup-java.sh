#!/usr/bin/env bash
# Make sure a Java 17 runtime is there for PySpark (the Spark tests and jobs need one):
# installs Debian's openjdk-17-jre-headless (or -21 where 17 is gone) when java is missing
# and we are root.
set -euo pipefail
java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -1
}
if command -v java >/dev/null && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup-java.sh: the Spark tests need Java 17:" \
       "sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
mkdir -p /usr/share/man/man1  # slim images lack it and the JRE's postinst needs it
apt-get update -qq
# Debian 12 has Java 17; later releases only 21, which PySpark 4 supports as well.
for package in openjdk-17-jre-headless openjdk-21-jre-headless; do
  if apt-cache show "$package" >/dev/null 2>&1; then
    echo "scripts/setup-java.sh: installing $package"
    apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$package" >/dev/null
    exit 0
  fi
done
echo "scripts/setup-java.sh: no Java 17 or 21 package found; install a JDK 17+" >&2
exit 1
