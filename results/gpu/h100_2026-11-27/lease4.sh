# third lease, fourth call: is the LM loop's 0.88x at width 512 its per-step loss read? The same
# bench with ours reading its losses every step and every 10, at commit 692de4e (which had
# --read-every and LOSS_READ_EVERY; reverted after this call: no difference measured). Its first
# try failed at the import (lifelong.streams needs the package installed); the second ran
# `pip install -e .` (carry .devcarry/whl) before it.
# Run as `bash results/gpu/h100_2026-11-27/lease4.sh` (no carry), timeout_s 150.
cd "$(dirname "$0")/../../.." && export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for every in 1 10; do
  timeout 65 python3 experiments/bench/lm_loop.py --device cuda --width 512 --layers 8 \
    --steps 100 --read-every $every > $OUT/bench_lm_loop_wide_read$every.txt 2>&1
  echo "rc=$?" >> $OUT/bench_lm_loop_wide_read$every.txt; tail -6 $OUT/bench_lm_loop_wide_read$every.txt
done
