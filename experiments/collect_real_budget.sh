#!/usr/bin/env bash
# Copy the finished runs of the real-data campaign into the repository's results folder.
#
#   bash experiments/collect_real_budget.sh [OUT] [DEST]   # defaults: runs, results/real_budget
#
# OUT is experiments/real_budget_campaign.sh's output folder. A run is finished when its
# metrics.json is written and its checkpoint.pt is gone (a run removes it when it ends); only its
# config, accuracy matrix and metrics are copied (what `lifelong report` reads), into
# DEST/text/<run> and DEST/fewrel/<run>. Then:
#   lifelong report DEST/text --claims text
#   lifelong report DEST/fewrel --claims fewrel
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs}
DEST=${2:-results/real_budget}
copied=0
for kind in text fewrel; do
    src="$OUT/${kind}_real_budget"
    [ -d "$src" ] || continue
    for run in "$src"/*/; do
        [ -f "$run/metrics.json" ] && [ ! -e "$run/checkpoint.pt" ] || continue
        name=$(basename "$run")
        mkdir -p "$DEST/$kind/$name"
        for file in config.yaml accuracy.csv metrics.json; do
            cp "$run/$file" "$DEST/$kind/$name/$file.tmp"
            mv "$DEST/$kind/$name/$file.tmp" "$DEST/$kind/$name/$file"
        done
        copied=$((copied + 1))
    done
done
echo "$copied finished runs copied to $DEST"
