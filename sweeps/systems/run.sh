#!/usr/bin/env bash
# Every system of the seeds on Multi30K En->De at the GRU budget of docs/training.md (`make systems-m30k`;
# docs/systems.md, "Every system of the seeds"): model=small-size models, Adam 1e-3, dev BLEU after every epoch,
# 6 epochs (the docs' model=small figure reached its 6th epoch in its 28 minutes), the best dev-BLEU checkpoint
# decoded on test2016 with beam 5 and greedily.
#
# Resumable: a run's folder is outputs/systems-m30k/<name>; an interrupted run restarts from its last.ckpt
# (rewritten every 3 minutes); a finished system (its greedy record written) is skipped. Records (eval.test.json,
# hypotheses) go to sweeps/results/systems-m30k/<name>/{beam5,greedy}; a record is written only after its decoding
# finished (sarnmt.evaluate writes it last); the table of all of them is printed and written to table.md at the end
# (python -m sarnmt sweep-systems), and once every system has its beam-5 hypotheses, the significance of the
# differences (sarnmt.score: paired bootstrap, approximate randomisation, the paper's t-test) of every system against
# the cGRU baseline (significance-cgru_baseline.{md,json}) and of the residual LSTM against its own baseline
# (significance-lstm_ff_attention.{md,json}). Usage: sweeps/systems/run.sh [name ...] (default: all), PY=python.
set -euo pipefail
PY=${PY:-.venv/bin/python}
DATA=${DATA:-../shared/data}
declare -A SYSTEMS=(
  [cgru_baseline]="model=small decoder=baseline"
  [cgru_self_attentive]="model=small decoder=self_attentive_content"
  [lstm_fixed_context]="model=lstm_fixed_context_small"
  [lstm_ff_attention]="model=lstm_ff_attention_small"
  [lstm_ff_attention_self_attentive]="model=lstm_ff_attention_small decoder=self_attentive_content"
  [lstm_input_feeding]="model=lstm_input_feeding_small"
)
ORDER=(cgru_baseline lstm_input_feeding lstm_ff_attention lstm_fixed_context cgru_self_attentive
       lstm_ff_attention_self_attentive)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=("${ORDER[@]}")
for name in "${names[@]}"; do
  [ -n "${SYSTEMS[$name]+x}" ] || { echo "unknown system '$name'; valid: ${ORDER[*]}" >&2; exit 2; }
  run=outputs/systems-m30k/$name
  out=sweeps/results/systems-m30k/$name
  if [ -f "$out/greedy/eval.test.json" ]; then echo "$name: done"; continue; fi
  resume=()
  [ -f "$run/checkpoints/last.ckpt" ] && resume=("ckpt_path=$run/checkpoints/last.ckpt")
  if [ ! -f "$run/trained" ]; then
    # shellcheck disable=SC2086
    $PY -m sarnmt.train data=multi30k_en_de data.root="$DATA" ${SYSTEMS[$name]} optim=adam optim.lr=0.001 \
      trainer.max_epochs=6 callbacks.resume_checkpoint.train_time_interval.minutes=3 \
      trainer.enable_progress_bar=false '~callbacks.progress_bar' hydra.run.dir="$run" "${resume[@]}"
    touch "$run/trained"
  fi
  # the checkpoint with the best dev BLEU (its name ends in -bleu<score>.ckpt)
  best=$(ls "$run"/checkpoints/epoch*-bleu*.ckpt | awk -F'-bleu' '{print $2 "\t" $0}' | sort -g -r | head -1 | cut -f2)
  for search in beam5 greedy; do
    decoding=$([ $search = beam5 ] && echo "decoding=beam decoding.beam_size=5" || echo "decoding=greedy")
    # shellcheck disable=SC2086
    $PY -m sarnmt evaluate ckpt_path="$best" data=multi30k_en_de data.root="$DATA" split=test $decoding \
      progress=false output_dir="$out/$search"
  done
done
$PY -m sarnmt sweep-systems results_dir=sweeps/results/systems-m30k | tee sweeps/results/systems-m30k/table.md

# significance on test2016 (beam 5), the first system being the baseline; skipped until every system has finished
significance() {
  local base=$1; shift
  local hyps=() names=()
  for name in "$base" "$@"; do
    hyps+=("sweeps/results/systems-m30k/$name/beam5/hypotheses.test.txt"); names+=("$name")
    [ -f "sweeps/results/systems-m30k/$name/greedy/eval.test.json" ] || { echo "significance vs $base: waits for $name"; return 0; }
  done
  (IFS=,; $PY -m sarnmt score ref="$DATA/multi30k-en-de/test_2016_flickr.de.gz" "hyps=[${hyps[*]}]" \
    "names=[${names[*]}]" output="sweeps/results/systems-m30k/significance-$base" \
    hydra.run.dir=outputs/systems-m30k/score-$base)
}
significance "${ORDER[@]}"  # every system against the first, the cGRU baseline
significance lstm_ff_attention lstm_ff_attention_self_attentive
