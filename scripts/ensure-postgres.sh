#!/usr/bin/env bash
# Make sure PostgreSQL server binaries (initdb, pg_ctl) are installed; idempotent.
# Prints the directory holding them. Installs Debian's `postgresql` package when missing
# (needs root, or passwordless sudo). Exit status 0 when the binaries are available.
set -euo pipefail

find_bindir() {
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

if bindir=$(find_bindir); then
    echo "$bindir"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "ensure-postgres: PostgreSQL is not installed and this user cannot install packages" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-postgres: PostgreSQL is not installed and apt-get is not available" >&2
    exit 1
fi

echo "ensure-postgres: installing PostgreSQL (Debian package 'postgresql')" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends postgresql >&2

if bindir=$(find_bindir); then
    echo "$bindir"
    exit 0
fi
echo "ensure-postgres: installation finished but initdb/pg_ctl were not found" >&2
exit 1
