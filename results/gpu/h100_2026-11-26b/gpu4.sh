# second lease, call 2: the paper-scale phases after Meta-MbPA (which call 1's 200 s did not pass)
cd "$(dirname "$0")/../.." && source .devcarry/scripts/setup.sh
timeout 150 python3 experiments/bench/scale.py --device cuda --precision auto \
  --strategies oml-er,anml-er --scopes head,top1 --adapt-examples 4 \
  > $OUT/bench_scale_oml_anml.txt 2>&1; echo "scale rc=$?" >> $OUT/bench_scale_oml_anml.txt
tail -22 $OUT/bench_scale_oml_anml.txt
timeout 85 python3 experiments/bench/scale.py --device cuda --precision auto --steps 2 \
  --strategies meta-mbpa --keys 10000 --scopes head --adapt-examples 1 \
  > $OUT/bench_scale_meta.txt 2>&1; echo "scale rc=$?" >> $OUT/bench_scale_meta.txt
tail -12 $OUT/bench_scale_meta.txt
