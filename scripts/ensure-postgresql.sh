#!/usr/bin/env bash
# `make distributed` starts a throwaway PostgreSQL server: Debian's, installed if missing
# (as scripts/ensure-chromium.sh installs the browser). Needs root or sudo the first time.
# Nothing is started or enabled here: the tests run initdb in a temporary folder.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "Installing Debian's postgresql for the distributed search tests..."
$SUDO apt-get update -qq
# policy-rc.d 101: do not start the packaged cluster's service (the tests start their own)
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/initdb
