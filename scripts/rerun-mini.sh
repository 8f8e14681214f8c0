#!/usr/bin/env bash
# The mini re-run to patience, Table 1's En->De rows first, then the De->En column, N jobs at a time (one thread each):
#   scripts/rerun-mini.sh WORKTREE [N]
# WORKTREE is a `git worktree` of the fixed commit the records are to carry, with the venv's python on PATH or in
# $PY. Every job is `sarnmt sweep-job scale=mini job=<id>`: a finished job (complete record) is skipped, an
# interrupted one resumes from its last checkpoint, so running this again after any stop goes on where it was.
# Records land in WORKTREE/sweeps/results/mini/records; copy them to main and commit them as they come.
set -euo pipefail
wt=$(cd "${1:?usage: scripts/rerun-mini.sh WORKTREE [N]}" && pwd)
n=${2:-2}
py=${PY:-python}
jobs=()
# pilot first: one seed of the baseline and of the self-attentive residual (content), Multi30K En->De
jobs+=(en_de.baseline.s1 en_de.self_attentive_content.s1 en_de.mean_residual.s1)
for s in 2 3 4 5; do for r in baseline mean_residual self_attentive_content; do jobs+=("en_de.$r.s$s"); done; done
for s in 1 2 3; do for r in lm_lstm lm_attention lm_4gram lm_mean_residual lm_self_attentive_residual; do
  jobs+=("lm_text.$r.s$s"); done; done
# then Table 1's other En->De rows (and Table 4's content+scope), 3 seeds each, at the column's commit
for s in 1 2 3; do for r in memory_rnn self_attentive_rnn self_attentive_content_scope; do jobs+=("en_de.$r.s$s"); done; done
# then the De->En column, every row, seed by seed (5 seeds for the three main rows, 3 for the others), so that a
# budget that ends midway leaves whole seeds
for s in 1 2 3 4 5; do for r in baseline mean_residual self_attentive_content; do jobs+=("es_en.$r.s$s"); done
  if [ "$s" -le 3 ]; then for r in memory_rnn self_attentive_rnn self_attentive_content_scope; do jobs+=("es_en.$r.s$s"); done; fi
done
cd "$wt"
# A record written by this worktree's commit (its "commit" field; the worktree is pinned, and a record is written
# last, whole) is finished: skip it here without starting sweep-job, which would skip it too, after a minute of
# imports on a starved machine. Records of other commits (the superseded ones committed there) still run.
head=$(git rev-parse HEAD)
mapfile -t todo < <(printf '%s\n' "${jobs[@]}" | "$py" -c '
import json, pathlib, sys
head = sys.argv[1]
for job in sys.stdin.read().split():
    path = pathlib.Path("sweeps/results/mini/records", job + ".json")
    if path.is_file() and json.loads(path.read_text()).get("commit") == head:
        print("record at", head[:7], "present, skipped:", job, file=sys.stderr)
    else:
        print(job)
' "$head")
printf '%s\n' "${todo[@]}" | OMP_NUM_THREADS=1 MKL_DYNAMIC=FALSE xargs -P "$n" -I{} \
  sh -c "nice -n 19 $py -m sarnmt.sweep_job scale=mini job={} cpu_threads=1 progress=false >> outputs/rerun-{}.log 2>&1 \
         && echo \"\$(date -u +%FT%TZ) done {}\" || echo \"\$(date -u +%FT%TZ) FAILED {} (outputs/rerun-{}.log)\""
