#!/usr/bin/env bash
# Install runstore with its test dependencies (and, as root, the system packages some tests
# drive for real), then run the whole test suite. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --disable-pip-version-check -q -e '.[test]'

# An editable install leaves runstore's modules uncompiled, and where PYTHONDONTWRITEBYTECODE
# is set no process writes their bytecode: every `runstore` process the tests start would
# compile them all again. Compile them once, as a regular install does.
python3 -m compileall -q runstore

# Headless Chromium for the real-browser tests of the HTML report (tests/present/test_charts.py)
# and of `runstore ui` (tests/ui/test_ui_browser.py, driven by Playwright from the test extra,
# pointed at this Chromium: Playwright's own browser download does not work offline).
# Only as root and only when missing; if the install fails the tests skip and say why.
if [ "$(id -u)" = 0 ] && ! command -v chromium >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        || echo "run.sh: could not install chromium; the browser test will skip" >&2
fi

# Imports go one way along the pipeline (docs/architecture.md): a broken contract fails here,
# before the tests run.
lint-imports

# Every core (pytest-xdist; PYTEST_XDIST_AUTO_NUM_WORKERS=N sets how many); a module marked
# xdist_group runs whole on one worker. Arguments go to pytest: `bash tests/run.sh
# tests/query/test_views.py -x` runs one file. The 25 slowest tests are listed at the end.
python3 -m pytest -q -p no:cacheprovider -n auto --dist loadgroup --durations=25 "$@"
