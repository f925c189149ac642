"""What Triton makes of fla-recurrent's kernel for one launch config, without a GPU: the one-off
probe behind ``run1/layouts.txt`` and ``run2/layouts.txt`` (kept here as the record of the command).

    python ptx_counts.py KERNEL_PY BV NUM_WARPS KL [--layouts]

prints the PTX's ``shfl.sync``, global loads (all, and 16-byte ones), 16-byte global stores,
shared memory bytes, ``bar.sync`` and the TTGIR's ``convert_layout`` count for ``triton.compile``
of ``gdn_decode_kernel`` for sm_90 (``KL = 4 x lanes_per_row``); ``--layouts`` adds the TTGIR's
``#blocked`` layouts. The counts depend on the Triton version that runs it (3.6 on the GPU
machines, the pinned ``gpu`` extra's: results/fla-notes.md).
"""

import importlib.util
import re
import sys
import warnings

import triton
from triton.backends.compiler import GPUTarget

warnings.filterwarnings("ignore")
spec = importlib.util.spec_from_file_location("kernel", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
bv, num_warps, kl = map(int, sys.argv[2:5])
pointers = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "state_ptr": "*fp32", "A_log_ptr": "*fp32",
            "a_ptr": "*bf16", "dt_bias_ptr": "*fp32", "b_ptr": "*bf16", "out_ptr": "*bf16", "new_state_ptr": "*fp32"}
signature = {**pointers, "scale": "fp32", **{n: "constexpr" for n in ("HQ", "HV", "K", "V", "BV", "KL")}}
constants = {"HQ": 4, "HV": 8, "K": 128, "V": 128, "BV": bv, "KL": kl}
aligned = {(i,): [["tt.divisibility", 16]] for i in range(len(pointers))}
source = triton.compiler.ASTSource(fn=module.gdn_decode_kernel, signature=signature, constexprs=constants, attrs=aligned)
compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": 1})
ptx, ttgir = compiled.asm["ptx"], compiled.asm["ttgir"]
print(f"bv{bv} w{num_warps} kl{kl}: shfl", len(re.findall(r"shfl\.sync", ptx)),
      "ld.global", len(re.findall(r"ld\.global", ptx)), "ld.v4", len(re.findall(r"ld\.global[.a-z0-9:]*\.v4", ptx)),
      "st.v4", len(re.findall(r"st\.global[.a-z0-9:]*\.v4", ptx)), "smem", compiled.metadata.shared,
      "bar", len(re.findall(r"bar\.sync", ptx)), "cvt_layout", ttgir.count("convert_layout"))
if "--layouts" in sys.argv[5:]:
    print("\n".join(line for line in ttgir.splitlines() if line.startswith("#blocked")))
