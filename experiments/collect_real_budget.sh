#!/usr/bin/env bash
# Copy the finished runs of the real-data campaign into the repository's results folder.
#
#   bash experiments/collect_real_budget.sh [OUT] [DEST]   # defaults: runs, results/real_budget
#
# OUT is experiments/real_budget_campaign.sh's output folder. A run is finished when its
# metrics.json is written and its checkpoint.pt is gone (a run removes it when it ends); only its
# config, accuracy matrix and metrics are copied (what `lifelong report` reads; a probing run's
# probing.csv too), into
# DEST/text/<run>, DEST/fewrel/<run> and, for Avalanche's Naive against SEQ over five seeds
# (the campaign runs that pair in its own folder, OUT/avalanche_pair, so that its extra seeds of
# order i stay out of the text table), DEST/avalanche_pair/<run>. The protocol's two checks go
# beside them: the replay-rate ablation's other rates into DEST/replay_rate_<ratio>/<run>,
# MbPA++'s wider scope into DEST/text_<scope>/<run>. Then:
#   lifelong report DEST/text --claims text
#   lifelong report DEST/fewrel --claims fewrel
#   lifelong report DEST/avalanche_pair --compare avalanche:naive,seq
#   python experiments/text_classification/replay_rate.py --collected DEST
#   python experiments/text_classification/wider_scope.py --collected DEST --orders i,ii,iii,iv
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs}
DEST=${2:-results/real_budget}
copied=0
pairs=(text_real_budget:text fewrel_real_budget:fewrel avalanche_pair/text_real_budget:avalanche_pair)
for src in "$OUT"/replay_rate_* "$OUT"/text_real_budget_*; do
    [ -d "$src" ] || continue
    name=$(basename "$src")
    pairs+=("$name:${name/#text_real_budget_/text_}")
done
for pair in "${pairs[@]}"; do
    src="$OUT/${pair%%:*}" kind="${pair#*:}"
    [ -d "$src" ] || continue
    for run in "$src"/*/; do
        [ -f "$run/metrics.json" ] && [ ! -e "$run/checkpoint.pt" ] || continue
        name=$(basename "$run")
        mkdir -p "$DEST/$kind/$name"
        for file in config.yaml accuracy.csv metrics.json probing.csv; do
            [ -f "$run/$file" ] || continue  # probing.csv: only a --probe run has one
            cp "$run/$file" "$DEST/$kind/$name/$file.tmp"
            mv "$DEST/$kind/$name/$file.tmp" "$DEST/$kind/$name/$file"
        done
        copied=$((copied + 1))
    done
done
echo "$copied finished runs copied to $DEST"
