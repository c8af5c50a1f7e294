#!/usr/bin/env bash
# Make this host able to run the browser tests (tests/server/test_server_docs.py): Debian's
# Chromium, and Playwright (the `browser` extra) in the project's virtualenv to drive it.
# Playwright's own browser download is never used: it needs the Internet.
#
#   scripts/browser-host.sh    install what is missing (Chromium with apt-get, as root)
#
# Never fails the build: without them the browser tests are skipped, and pytest says why.
set -uo pipefail
cd "$(dirname "$0")/.."

log() { echo "browser-host.sh: $*" >&2; }

if ! command -v chromium >/dev/null; then
    if [[ $(id -u) -ne 0 ]]; then
        log "not root and no chromium: the browser tests will be skipped"
    else
        log "installing chromium with apt-get"
        if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
            apt-get update -q >&2 || true
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2 \
            || log "could not install chromium: the browser tests will be skipped"
    fi
fi
# A font with Chinese glyphs, so that the dashboard's zh-CN screenshots show text, not boxes.
if ! fc-list 2>/dev/null | grep -qiE "wqy|cjk"; then
    if [[ $(id -u) -eq 0 ]]; then
        log "installing a Chinese font (fonts-wqy-microhei) with apt-get"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q fonts-wqy-microhei >&2 \
            || log "could not install fonts-wqy-microhei: Chinese text will show as boxes"
    fi
fi
if [[ -x .venv/bin/pip ]] && ! .venv/bin/python -c "import playwright" 2>/dev/null; then
    log "installing Playwright into .venv"
    .venv/bin/pip install --quiet -e '.[browser]' >&2 || log "could not install Playwright"
fi
exit 0
