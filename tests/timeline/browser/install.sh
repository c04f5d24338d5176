#!/usr/bin/env bash
# Installs what the timeline's browser test needs, and nothing else: Debian's chromium (never a
# browser download of puppeteer's own) and the npm packages pinned in package-lock.json
# (puppeteer-core, speedscope) into node_modules here. Safe to run again: it installs only what
# is missing. Exits non-zero, saying what failed, if it cannot; the test then skips.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
start=$(date +%s)

if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  echo "browser-test setup: installing chromium"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium
fi
command -v npm > /dev/null || { echo "browser-test setup: npm is missing" >&2; exit 1; }
if [ ! -f "$here/node_modules/.package-lock.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  echo "browser-test setup: npm ci in $here"
  (cd "$here" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
echo "browser-test setup: chromium and the npm packages are in place ($(( $(date +%s) - start )) s)"
