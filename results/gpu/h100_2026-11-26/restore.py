"""Device side: rebuild MiniLM's fp32 model.safetensors from the carried fp16 copy."""

import sys

import torch
from safetensors.torch import load_file, save_file

src, dst = sys.argv[1], sys.argv[2]
tensors = load_file(src)
save_file(
    {
        k: (v.to(torch.float32) if v.is_floating_point() else v).contiguous()
        for k, v in tensors.items()
    },
    dst,
)
print("restored", dst)
