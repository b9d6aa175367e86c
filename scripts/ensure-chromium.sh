#!/usr/bin/env bash
# Make sure a headless Chromium is installed for the browser tests (tests/ui/); idempotent.
# Prints the path of the executable. Installs Debian's `chromium` package when missing
# (needs root, or passwordless sudo). Exit status 0 when Chromium is available; otherwise 1,
# and the browser tests skip, saying why.
set -euo pipefail

find_chromium() {
    local c
    for c in chromium chromium-browser; do
        if command -v "$c" >/dev/null 2>&1; then
            readlink -f "$(command -v "$c")"
            return 0
        fi
    done
    return 1
}

if path=$(find_chromium); then
    echo "$path"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "ensure-chromium: Chromium is not installed and this user cannot install packages" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: Chromium is not installed and apt-get is not available" >&2
    exit 1
fi

echo "ensure-chromium: installing Chromium (Debian package 'chromium')" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2

if path=$(find_chromium); then
    echo "$path"
    exit 0
fi
echo "ensure-chromium: installation finished but no chromium executable was found" >&2
exit 1
