#!/usr/bin/env bash
# The real-data campaign behind docs/guide/results.md: every run of its tables, one command.
#
#   bash experiments/real_budget_campaign.sh [OUT]        # OUT: where the runs go (default runs)
#
# Every line is a resumable sweep (finished runs are skipped, interrupted ones resumed), so the
# script can be stopped at any point and started again; run it with `nice` beside other work.
# The order puts the papers' central comparisons first. About 60 hours on 2 CPU cores in all
# (SEQ/REPLAY on text about 8 minutes a run, MbPA++ 25-35, Meta-MbPA 1-2 hours; FewRel about
# 13 minutes a run); a GPU makes it a few hours (--device is the config's `training.device`).
# The Avalanche rows need the Avalanche environment (`make setup-avalanche` builds
# .venv-avalanche) and run with that environment's `lifelong` (AVALANCHE_LIFELONG; skipped,
# with a line saying so, when it is not there): Naive against SEQ over five seeds right after
# FewRel, the Naive/Replay/EWC table rows after ours.
# Two copies may run side by side: every run is held by the process running it, and a sweep
# passes over the runs another process holds (`lifelong sweep` exits 4, "busy"; the script goes
# on). On a 2-core machine two copies at one thread each (OMP_NUM_THREADS=1) train MiniLM 1.17x
# faster in all than one copy at two threads (2.88 against 2.47 steps/s, batch 16 x 64 tokens,
# measured side by side on 2026-11-27), though each run then takes about 1.7x as long.
# Afterwards:
#   lifelong report OUT/text_real_budget --claims text
#   lifelong report OUT/fewrel_real_budget --claims fewrel
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs}
LIFELONG=${LIFELONG:-lifelong}
PY=${PY:-python}
AVALANCHE_LIFELONG=${AVALANCHE_LIFELONG:-.venv-avalanche/bin/lifelong}
TEXT_DATA=../shared/data/text_real
FEWREL_DATA=${FEWREL_DATA:-$OUT/fewrel_cfrl}

EXIT_BUSY=4  # `lifelong sweep`: some runs were held by another process (they are its to finish)
busy_ok() { local status=$?; [ "$status" -eq "$EXIT_BUSY" ] || return "$status"; }
text() { $LIFELONG sweep experiments/text_classification/real_budget.yaml --data-dir "$TEXT_DATA" --output-dir "$OUT" "$@" || busy_ok; }
fewrel() { $LIFELONG sweep experiments/fewrel/real_budget.yaml --data-dir "$FEWREL_DATA" --output-dir "$OUT" "$@" || busy_ok; }

# FewRel: the real sentences cut into training / test parts (seeded, so the same every time).
[ -f "$FEWREL_DATA/relation_name.txt" ] || $PY experiments/fewrel/prepare_cfrl.py --out "$FEWREL_DATA"

# Text classification, seed 0: SEQ, REPLAY and MbPA++ (the central effect), then the rest.
text --strategies seq,replay,mbpa++,seq-star --orders i,ii,iii,iv --seeds 0
# FewRel (pooled accuracy), five cluster orders, one seed.
fewrel --strategies seq,replay --orders 0,1,2,3,4 --seeds 0
fewrel --strategies agem,mtl,mbpa++,oml-er,anml-er --orders 0,1,2,3,4 --seeds 0
# Avalanche's Naive against our SEQ on the same batches, five seeds of order i (the interop's
# acceptance check), then Avalanche's Naive, Replay and EWC rows beside ours (the table's end).
# The pair runs in its own folder, OUT/avalanche_pair, both sides in the Avalanche environment:
# its seeds 2-4 of order i would tilt the text table's SEQ row towards order i.
if [ -x "$AVALANCHE_LIFELONG" ]; then
    ava() { LIFELONG=$AVALANCHE_LIFELONG text "$@"; }
else
    ava() { echo "no Avalanche environment at $AVALANCHE_LIFELONG: its rows are not run" >&2; }
fi
OUT="$OUT/avalanche_pair" ava --strategies seq,avalanche:naive --orders i --seeds 0,1,2,3,4
# The replay-rate ablation (REPLAY and MbPA++ at four rates), then the table's runs of up to
# about an hour and a half: a stopped run resumes from its last checkpoint, but on a machine lent
# for a few hours at a time, whose files are gone afterwards, only runs shorter than that finish.
$PY experiments/text_classification/replay_rate.py --data-dir "$TEXT_DATA" --output-dir "$OUT"
text --strategies oml-er,agem,mtl --orders i,ii,iii,iv --seeds 0
text --strategies anml-er,ewc,mbpa,mbpa++-rand,maml-er --orders i,ii,iii,iv --seeds 0
# Seed 1 for the strategies the acceptance table carries at two seeds per order.
text --strategies seq,seq-star,replay,mbpa++,oml-er,mtl --orders i,ii,iii,iv --seeds 1
# Meta-MbPA at seed 0 before the remaining rows: its six claimed orderings need it (112-115
# minutes a run at one thread beside a second copy, orders i and ii on 2026-11-28: its meta step
# runs over 32 neighbours per example; real_budget.yaml checkpoints it every 25 updates).
text --strategies meta-mbpa --orders i,ii,iii,iv --seeds 0
ava --strategies avalanche:naive,avalanche:replay,avalanche:ewc --orders i,ii,iii,iv --seeds 0
# The replay-rate ablation on the other three orders, for intervals over all four.
$PY experiments/text_classification/replay_rate.py --data-dir "$TEXT_DATA" --output-dir "$OUT" \
    --orders i,ii,iii,iv
# What wins at a budget (issue 65; costs are measured by these runs, not derived): the
# training-free prototype baselines first (a few minutes a run), then dense replay at
# Avalanche's memory (M = 200, its own folder) and at the budget's (M = 10,000), the prototype
# baselines after SEQ*'s warm-up, Avalanche's DER++ and LwF, REPLAY replaying 50% and 100% of the
# stream, ER on FewRel (NCM classifies by class: not on relations), and the probing runs
# (SEQ, REPLAY, MbPA++ and ER on two orders).
text --strategies ncm --orders i,ii,iii,iv --seeds 0  # no seed enters NCM: seed 1 repeats it
$PY experiments/text_classification/er_memory.py --data-dir "$TEXT_DATA" --output-dir "$OUT" \
    --sizes 200 --orders i,ii,iii,iv --seeds 0,1
text --strategies ranpac --orders i,ii,iii,iv --seeds 0,1
$PY experiments/text_classification/warmed_prototypes.py --data-dir "$TEXT_DATA" \
    --output-dir "$OUT" --orders i,ii,iii,iv --seeds 0,1
text --strategies er --orders i,ii,iii,iv --seeds 0,1
ava --strategies avalanche:der,avalanche:lwf --orders i,ii,iii,iv --seeds 0,1
$PY experiments/text_classification/replay_rate.py --data-dir "$TEXT_DATA" --output-dir "$OUT" \
    --ratios 0.5,1.0 --strategies replay --orders i,ii,iii,iv --seeds 0,1
fewrel --strategies er --orders 0,1,2,3,4 --seeds 0  # NCM: classification only
$PY experiments/text_classification/probing.py --data-dir "$TEXT_DATA" --output-dir "$OUT" \
    --strategies seq,replay,mbpa++,er --orders i,ii --seeds 0
# Longest last: Meta-MbPA's second seed and MbPA++ adapting the top layer too (the wider scope).
text --strategies meta-mbpa --orders i,ii,iii,iv --seeds 1
$PY experiments/text_classification/wider_scope.py --data-dir "$TEXT_DATA" --scope top1 \
    --orders i,ii,iii,iv --output-dir "$OUT"
