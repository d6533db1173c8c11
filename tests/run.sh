#!/usr/bin/env bash
# Install runstore with its test dependencies (and, as root, the system packages some tests
# drive for real), then run the whole test suite. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --disable-pip-version-check -q -e '.[test]'

python3 -m pytest -q -p no:cacheprovider "$@"
