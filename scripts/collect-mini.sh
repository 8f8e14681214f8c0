#!/usr/bin/env bash
# Copy the finished jobs of the mini re-run to patience (scales/mini.yaml, scripts/rerun-mini.sh) from its worktree
# into this checkout, to be committed:
#   scripts/collect-mini.sh WORKTREE
# A job's record (records/<job>.json) is written last and atomically, so a job with a record has finished; its
# per-sentence statistics and hypotheses come with it. A record already here is left as it is (never overwritten);
# one that differs from the worktree's is named, and the script exits 1.
set -euo pipefail
wt=$(cd "${1:?usage: scripts/collect-mini.sh WORKTREE}" && pwd)
from="$wt/sweeps/results/mini"
to="$(cd "$(dirname "$0")/.." && pwd)/sweeps/results/mini"
mkdir -p "$to/records" "$to/hypotheses"
status=0
for record in "$from"/records/*.json; do
  [ -e "$record" ] || continue
  job=$(basename "$record" .json)
  if [ -e "$to/records/$job.json" ]; then
    cmp -s "$record" "$to/records/$job.json" || { echo "differs, left as it is: records/$job.json" >&2; status=1; }
    continue
  fi
  [ -e "$from/records/$job.sentences.json.gz" ] && cp "$from/records/$job.sentences.json.gz" "$to/records/"
  [ -d "$from/hypotheses/$job" ] && cp -r "$from/hypotheses/$job" "$to/hypotheses/"
  cp "$record" "$to/records/"
  echo "collected $job"
done
exit $status
