"""Here: pack MiniLM's fp32 model.safetensors as int8 for a device call (64 MiB limit).

Each float matrix becomes int8 with one fp32 scale per row (absmax / 127), vectors fp16;
`../h100_2026-11-26b/restore8.py` widens them back to fp32 on the device.

    python pack8.py SRC/model.safetensors .devcarry/mini8/model.int8.safetensors
"""

import sys

import torch
from safetensors.torch import load_file, save_file

src, dst = sys.argv[1], sys.argv[2]
out = {}
for name, value in load_file(src).items():
    if value.is_floating_point() and value.dim() == 2:
        scale = value.abs().amax(dim=1).clamp_min(1e-12) / 127  # (rows,)
        out[name] = torch.round(value / scale[:, None]).to(torch.int8).contiguous()
        out[name + "::scale"] = scale.float().contiguous()
    elif value.is_floating_point():
        out[name] = value.half().contiguous()
    else:
        out[name] = value
save_file(out, dst)
