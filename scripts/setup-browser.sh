#!/usr/bin/env bash
# Make sure Debian's Chromium and its WebDriver are there for the web console's browser tests
# (tests/browser, Selenium): installs chromium and chromium-driver when /usr/bin/chromium or
# /usr/bin/chromedriver is missing and we are root. Debian's packages, not a browser build
# downloaded by Selenium Manager: the tests name these two paths and nothing is fetched at
# run time.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup-browser.sh: the browser tests need Chromium and its driver:" \
       "sudo apt-get install -y chromium chromium-driver" >&2
  exit 1
fi
echo "scripts/setup-browser.sh: installing chromium chromium-driver"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq -o DPkg::Lock::Timeout=300 chromium chromium-driver >/dev/null
