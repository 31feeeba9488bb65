#!/usr/bin/env bash
# Run the UNO CLI from the project's own environment, creating it on first use.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -x "$root/.venv/bin/uno" ] || [ "$root/pyproject.toml" -nt "$root/.venv/.uno-installed" ]; then
  "$root/scripts/setup.sh" python >&2
fi
exec "$root/.venv/bin/uno" "$@"
