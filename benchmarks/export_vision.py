"""export_vision.py OUT_DIR: the 30 vision ONNX exports that clean_vs_peers.py is run on.

Usage: python3 benchmarks/export_vision.py OUT_DIR

Ten torchvision and timm models, random weights, eval mode, one 1x3x224x224 float32 input, each
written as OUT_DIR/<model>.<form>.onnx in three forms, since each exporter leaves different debris
for a cleaner to remove:
  ts         TorchScript exporter, opset 17, constant folding on
  ts_nofold  TorchScript exporter, opset 17, constant folding off
  dynamo     dynamo exporter, opset 18, its default optimization
A model or form that fails prints one line and the rest go on; the exit status is 1 if any failed.

The weights are not the libraries' defaults but re-initialised (see reinit): outputs of random
default weights vanish in deep nets (vit_b_16's zero head gives exactly 0, efficientnet_b0 about
1e-14), and a comparison of near-zero outputs proves nothing. With each convolution and linear
layer rescaled to a unit-scale output and non-trivial BatchNorm and LayerNorm parameters, every
model's outputs on a standard normal input are of order 1 to 10, and every BatchNorm fold has
real numbers to fold.

Needs torch, torchvision, timm, onnx and onnxscript (for the dynamo exporter).
"""
import os
import sys
import time
import warnings

import onnx
import timm
import torch
import torchvision
from torch import nn

# The TorchScript exporter is wanted on purpose: its graphs are one of the forms measured.
warnings.filterwarnings("ignore", "You are using the legacy TorchScript", DeprecationWarning)

TORCHVISION = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "swin_t",
               "vit_b_16"]
TIMM = ["levit_128s", "mobilevit_s", "efficientvit_b0", "tf_efficientnet_b0"]


def build(name):
    # Seeded per model so one model's file does not depend on which were built before it.
    torch.manual_seed(0)
    if name in TORCHVISION:
        model = torchvision.models.get_model(name, weights=None)
    else:
        model = timm.create_model(name, pretrained=False)
    model.eval()
    reinit(model)
    return model


@torch.no_grad()
def reinit(model):
    hooks, done = [], set()
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            # Fan-in scaling is only a start: the gain of the activation before a layer varies
            # (ReLU, SiLU, hardswish, GELU) and residual adds grow the scale, neither of which
            # fan-in sees, so unit_output rescales each layer from data. It stays for a layer
            # whose module is bypassed (the attention of swin_t and vit_b_16 takes its weights).
            nn.init.kaiming_normal_(m.weight, nonlinearity="linear")
            hooks.append(m.register_forward_hook(unit_output))
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            # Eval-mode BatchNorm is an affine map that exporters and cleaners fold into the
            # convolution before it; statistics of 0 and 1 would make that fold an identity.
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
        elif not isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
            continue
        if m.weight is not None and m.weight.dim() == 1:
            m.weight.uniform_(0.5, 1.5)
        if m.bias is not None:
            m.bias.normal_(0, 0.1)
        done.update(map(id, m.parameters(recurse=False)))
    for p in model.parameters():
        # A constant init (a zero class token or attention bias, a layer scale of 1e-6) leaves
        # its op with nothing to compare, or switches a whole branch off.
        if id(p) not in done and p.min() == p.max():
            p.normal_(0, 0.1)
    model(torch.randn(1, 3, 224, 224))
    for h in hooks:
        h.remove()


def unit_output(m, inputs, out):
    # Hooks run in execution order, so each layer is rescaled on inputs already rescaled.
    s = out.std()
    m.weight /= s
    if m.bias is not None:
        m.bias /= s
    return out / s


def export(model, form, path):
    x = torch.randn(1, 3, 224, 224)
    if form == "dynamo":
        # One self-contained file, like the TorchScript exporter's: every model here is far
        # below protobuf's 2 GiB limit, and the default would write a .data file beside it.
        torch.onnx.export(model, (x,), path, dynamo=True, opset_version=18, external_data=False)
    else:
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                          do_constant_folding=form == "ts")


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    failed = []
    for name in TORCHVISION + TIMM:
        for form in ("ts", "ts_nofold", "dynamo"):
            path = os.path.join(out_dir, f"{name}.{form}.onnx")
            start = time.perf_counter()
            try:
                # Not under no_grad: that sends nn.MultiheadAttention (vit_b_16) down its fused
                # fast path, which the TorchScript exporter cannot export.
                export(build(name), form, path)
            except Exception as e:  # one bad export must not cost the rest of the corpus
                failed.append(f"{name}.{form}")
                first = (str(e).splitlines() or [""])[0]
                print(f"FAILED {name}.{form}: {type(e).__name__}: {first}", flush=True)
                continue
            print(f"{path}: {len(onnx.load(path).graph.node)} nodes, "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
    if failed:
        print(f"{len(failed)} failed: {' '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
