# sourced by gpu1.sh / gpu2.sh on the device machine, in the repository root
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export PYTHONPATH=$PWD/.devcarry/site
if ! python3 -c "import lifelong.strategies" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir .devcarry/whl/*.whl 2>&1 | tail -2
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir -e . 2>&1 | tail -2
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import sys,torch,transformers,lifelong.strategies as s;print(sys.version.split()[0],'torch',torch.__version__,'transformers',transformers.__version__,torch.cuda.get_device_name())"
  python3 -c "import faiss;print('faiss',faiss.__version__)"; } 2>&1 | tee -a $OUT/env.txt
