#!/bin/sh
# System packages some tests use: headless Chromium and its WebDriver (tests
# marked `browser`). Installed from Debian's archive when absent; skipped when
# already there or when apt-get is not available (those tests then skip).
set -eu

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: no apt-get; skipping chromium (browser tests will skip)" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-test-deps: not root and no sudo; skipping chromium (browser tests will skip)" >&2
        exit 0
    fi
fi
if ! { $SUDO apt-get update -qq && \
       $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }; then
    echo "install-test-deps: could not install chromium; browser tests will skip" >&2
fi
