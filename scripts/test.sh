#!/usr/bin/env bash
# The test suite, slow tests included (pass -m "not slow" to skip them).
source "$(dirname "$0")/setup.sh"
python -m pytest -q "$@"
