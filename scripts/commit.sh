#!/usr/bin/env bash
# Commit only the given paths, even while others stage files in the same work tree:
#   scripts/commit.sh "message" PATH...
# Retries while another commit holds the index lock.
set -uo pipefail
msg="$1"; shift
[ $# -gt 0 ] || { echo "usage: scripts/commit.sh MESSAGE PATH..." >&2; exit 2; }
for i in $(seq 1 30); do
  if git add -A -- "$@" 2>/tmp/commit.$$ && git commit -q -m "$msg" --only -- "$@" 2>>/tmp/commit.$$; then
    rm -f /tmp/commit.$$; git log --oneline -1; exit 0
  fi
  if grep -q "index.lock" /tmp/commit.$$; then sleep 1; continue; fi
  cat /tmp/commit.$$ >&2; rm -f /tmp/commit.$$; exit 1
done
echo "commit.sh: index stayed locked" >&2; exit 1
