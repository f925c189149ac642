# one-off: call cuda-v4's variant NAME at B on the tuner's inputs, from an all-variants build with DEFINES (comma list)
import sys, torch
from tools.tune.cuda_v4 import CudaV4
from tools.tune.inputs import tune_inputs
name, batch, defines = sys.argv[1], int(sys.argv[2]), tuple(d for d in sys.argv[3].split(",") if d)
adapter = CudaV4(defines=defines); adapter.load()
inputs, _ = tune_inputs(batch, "bfloat16", torch.device("cuda"))
fn = adapter.call(adapter.configs("bfloat16")[name], inputs)
torch.cuda.synchronize()
for _ in range(13): fn()
torch.cuda.synchronize()
