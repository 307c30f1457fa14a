import sys, torch
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1], sys.argv[2]
out = {}
for name, v in load_file(src).items():
    if v.is_floating_point() and v.dim() == 2:
        scale = v.abs().amax(dim=1).clamp_min(1e-12) / 127
        out[name] = torch.round(v / scale[:, None]).to(torch.int8).contiguous()
        out[name + "::scale"] = scale.float().contiguous()
    elif v.is_floating_point():
        out[name] = v.half().contiguous()
    else:
        out[name] = v
save_file(out, dst)
