// The launch tables of cuda-v4, one file per GPU it was tuned on: launch_table.<device slug>.cuh,
// each one GDN_V4_GPU("<device name>", X(...) ...) entry (the fp32 state's table) and, where the
// bf16 state was tuned, one GDN_V4_GPU_BF16 entry of the same form, written by
// `python -m tools.tune --algo cuda-v4` on that GPU (which also adds its line here: C++ cannot
// list a folder, so this file names the tables; tests/solutions/test_cuda_v4_table.py checks it names each
// file once). kernel.cu includes this file several times, each time with its own GDN_V4_GPU,
// GDN_V4_GPU_BF16 and X: no include guard.
#include "launch_table.NVIDIA-H100-80GB-HBM3.cuh"
#include "launch_table.NVIDIA-H200.cuh"
