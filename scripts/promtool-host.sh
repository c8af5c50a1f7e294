#!/usr/bin/env bash
# Make this host able to check the Prometheus rules (deploy/prometheus/) with promtool:
# `promtool check rules` and `promtool test rules` (tests/deploy/test_deploy_promtool.py).
#
#   scripts/promtool-host.sh    install promtool from Debian's `prometheus` package if missing
#
# Only the promtool binary is taken (the package is downloaded and unpacked, never installed),
# so that no Prometheus server is set up or started on the host.  Never fails the build:
# without root or apt, the promtool tests are skipped and the parser tests still check the
# rules file, and pytest says why.
set -uo pipefail

log() { echo "promtool-host.sh: $*" >&2; }

if command -v promtool >/dev/null; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    log "no promtool, and no root apt-get to install it: the promtool tests will be skipped"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
    apt-get update -q >&2 || true
fi
if (cd "$work" && apt-get download -q prometheus >&2) &&
    dpkg-deb -x "$work"/prometheus_*.deb "$work/root" &&
    install -m 0755 "$work/root/usr/bin/promtool" /usr/local/bin/promtool; then
    log "installed $(promtool --version 2>&1 | head -n 1)"
else
    log "could not install promtool from Debian's prometheus package: its tests will be skipped"
fi
exit 0
