#!/usr/bin/env bash
# Install runstore with its test dependencies (and, as root, the system packages some tests
# drive for real), then run the whole test suite. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --disable-pip-version-check -q -e '.[test]'

# Headless Chromium for the real-browser test of the HTML report (tests/test_charts.py).
# Only as root and only when missing; if the install fails the test skips and says why.
if [ "$(id -u)" = 0 ] && ! command -v chromium >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        || echo "run.sh: could not install chromium; the browser test will skip" >&2
fi

python3 -m pytest -q -p no:cacheprovider "$@"
