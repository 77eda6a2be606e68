#!/usr/bin/env bash
# Style and shape: ruff's lint and format check, and the import-linter contracts in pyproject.toml
# (layers from the command line down to the model's operations, no cycles, the networks a leaf).
source "$(dirname "$0")/setup.sh"
ruff check .
ruff format --check .
lint-imports
