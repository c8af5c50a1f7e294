#!/usr/bin/env bash
# Make this host able to run `onecluster lab` and the lab tests: root, /dev/net/tun, and the
# tools the lab calls (ip and tc from iproute2, nsenter from util-linux, sysctl from procps),
# and rsync, the baseline of benchmarks/bench_transfer.py.
#
#   scripts/lab-host.sh        install what is missing (as root, with apt-get); say what is not
#
# Never fails the build: without root the lab tests are skipped, and pytest says why.
set -uo pipefail

log() { echo "lab-host.sh: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
    log "not root: the lab tests (marker 'lab') will be skipped"
    exit 0
fi
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v tc >/dev/null || missing+=(iproute2)
command -v nsenter >/dev/null || missing+=(util-linux)
command -v sysctl >/dev/null || missing+=(procps)
command -v rsync >/dev/null || missing+=(rsync)
if ((${#missing[@]})); then
    log "installing ${missing[*]} with apt-get"
    if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
        apt-get update -q >&2 || true
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 || log "could not install ${missing[*]}"
fi
if [[ ! -e /dev/net/tun ]]; then
    modprobe tun 2>/dev/null || log "/dev/net/tun is missing: the lab tests will be skipped"
fi
exit 0
