# call 1: the CUDA-marked tests, then the memory and paper-scale benches with --device cuda
cd "$(dirname "$0")/../.." && source .devcarry/scripts/setup.sh
timeout 170 python3 -m pytest -p no:cacheprovider -m cuda -q -rs --durations=8 \
  tests/lifelong/test_runtime.py tests/lifelong/memory/test_search.py \
  tests/lifelong/memory/test_index_choice.py > $OUT/cuda_tests.txt 2>&1; echo "pytest rc=$?" >> $OUT/cuda_tests.txt
tail -25 $OUT/cuda_tests.txt
timeout 150 python3 experiments/bench/scale.py --device cuda --precision auto \
  > $OUT/bench_scale.txt 2>&1; echo "scale rc=$?" >> $OUT/bench_scale.txt
tail -40 $OUT/bench_scale.txt
timeout 110 python3 experiments/bench/memory.py --device cuda --sizes 100k,1m --repeats 2 \
  --cache-dir off > $OUT/bench_memory.txt 2>&1; echo "memory rc=$?" >> $OUT/bench_memory.txt
tail -30 $OUT/bench_memory.txt
