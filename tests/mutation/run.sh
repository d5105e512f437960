#!/usr/bin/env bash
# Mutation check of the test suites: builds copies of the tree with known bugs (mutations.py) and
# shows that the tests catch each one. See run.py for the options; the usual call is
#   bash tests/mutation/run.sh [--jobs N] [--only id,id] [--table FILE] [--timeout S] [--keep] [WORKDIR]
# and `bash tests/mutation/run.sh --check` applies every mutation without building (seconds).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export PYTHONDONTWRITEBYTECODE=1
exec python3 -u "$here/run.py" "$@"
