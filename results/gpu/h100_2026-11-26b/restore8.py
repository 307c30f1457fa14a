"""Device side: rebuild MiniLM's fp32 model.safetensors from the carried int8 copy.

Each float matrix travelled as int8 with one fp32 scale per row (absmax / 127); vectors travelled
as fp16. Widened back to fp32 here; the benches fine-tune the model before they time it.
"""

import sys

import torch
from safetensors.torch import load_file, save_file

src, dst = sys.argv[1], sys.argv[2]
packed = load_file(src)
out = {}
for name, value in packed.items():
    if name.endswith("::scale"):
        continue
    scale = packed.get(name + "::scale")
    if scale is not None:
        out[name] = (value.to(torch.float32) * scale[:, None]).contiguous()
    else:
        out[name] = value.to(torch.float32) if value.is_floating_point() else value
save_file(out, dst)
print("restored", dst)
