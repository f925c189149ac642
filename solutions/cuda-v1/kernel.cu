// cuda-v1: GDN decode step for Qwen3-Next (gdn_decode_qk4_v8_d128_k_last).
//
// Design ("direct"): one warp per block; a block owns 8 consecutive V rows of
// one (batch, v-head) state tile and keeps them in registers for the whole
// step. Lane l owns K columns [4l, 4l+4) of every row (one 16-byte float4 per
// row), so a row of 128 floats is one fully coalesced 512-byte warp access.
// Dot products along K are a per-lane 4-term partial sum followed by a
// butterfly __shfl_xor_sync all-reduce. The gates are recomputed by every lane
// (a few expf per thread; cheaper than any broadcast).
//
// Math (fp32), per (batch b, v-head h), S = state[b, h] as [V, K]:
//   g    = exp(-exp(A_log[h]) * softplus(a[b, h] + dt_bias[h]))
//   beta = sigmoid(b[b, h])
//   S    = g * S
//   u[v] = sum_k S[v, k] * k[k]                 (k of q/k head h / 2)
//   S   += (beta * (v[v] - u[v])) * k[k]
//   o[v] = scale * sum_k S[v, k] * q[k]         (updated S)
//
// Grid = (V / 8, HV, B) = (16, 8, B) blocks of 32 threads.
// Exported (tvm-ffi, destination passing style, definition argument order):
//   gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state)

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/base.h>
#include <tvm/ffi/extra/cuda/device_guard.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <initializer_list>

namespace {

namespace ffi = tvm::ffi;

constexpr int kNumQKHeads = 4;                      // HQ
constexpr int kNumVHeads = 8;                       // HV
constexpr int kHeadK = 128;                         // K
constexpr int kHeadV = 128;                         // V
constexpr int kGroup = kNumVHeads / kNumQKHeads;    // v heads per q/k head (GVA)
constexpr int kWarpSize = 32;
constexpr int kKPerLane = kHeadK / kWarpSize;       // 4 K columns per lane = one float4
constexpr int kRowsPerBlock = 8;                    // V rows owned by one block (one warp)
constexpr float kDefaultScale = 0.08838834764831845f;  // 1 / sqrt(128)

static_assert(kKPerLane == 4, "a lane's K slice must be exactly one float4");
static_assert(kHeadV % kRowsPerBlock == 0, "blocks must tile V exactly");
static_assert(kRowsPerBlock == 8, "v/output are moved as one 16-byte chunk of 8 bf16");

// ---------------------------------------------------------------- device helpers

// bf16 -> fp32 is exact: the bf16 bits are the high half of the fp32 bits.
__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

__device__ __forceinline__ float load_bf16(const uint16_t* p) {
  return __uint_as_float(static_cast<uint32_t>(__ldg(p)) << 16);
}

// 4 consecutive bf16 (8 bytes; p must be 8-byte aligned) -> float4.
// Element 0 is the low half of the first 32-bit word (little endian).
__device__ __forceinline__ float4 load_bf16x4(const uint16_t* p) {
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  return make_float4(bf16_lo(raw.x), bf16_hi(raw.x), bf16_lo(raw.y), bf16_hi(raw.y));
}

// 8 consecutive bf16 (16 bytes; p must be 16-byte aligned) -> out[0..7].
__device__ __forceinline__ void load_bf16x8(const uint16_t* p, float (&out)[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16_lo(words[i]);
    out[2 * i + 1] = bf16_hi(words[i]);
  }
}

// Two floats -> two round-to-nearest-even bf16 packed low-first into one word.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return l | (h << 16);
}

// scale * x[0..7] -> 8 bf16 in one 16-byte store (p must be 16-byte aligned).
__device__ __forceinline__ void store_bf16x8(uint16_t* p, const float (&x)[8], float scale) {
  uint4 raw;
  raw.x = pack_bf16x2(scale * x[0], scale * x[1]);
  raw.y = pack_bf16x2(scale * x[2], scale * x[3]);
  raw.z = pack_bf16x2(scale * x[4], scale * x[5]);
  raw.w = pack_bf16x2(scale * x[6], scale * x[7]);
  __stcs(reinterpret_cast<uint4*>(p), raw);  // the intrinsic guarantees one 16-byte store
}

__device__ __forceinline__ float dot4(float4 x, float4 y) {
  return fmaf(x.w, y.w, fmaf(x.z, y.z, fmaf(x.y, y.y, x.x * y.x)));
}

// x + d * y, elementwise.
__device__ __forceinline__ float4 axpy4(float d, float4 y, float4 x) {
  return make_float4(fmaf(d, y.x, x.x), fmaf(d, y.y, x.y), fmaf(d, y.z, x.z), fmaf(d, y.w, x.w));
}

__device__ __forceinline__ float4 scale4(float4 x, float s) {
  return make_float4(s * x.x, s * x.y, s * x.z, s * x.w);
}

// Sum of x[i] over the 32 lanes, left in every lane. The offset loop is the
// outer one so the N independent shuffle chains interleave (ILP).
// Requires all 32 lanes to be active (the block is exactly one full warp).
template <int N>
__device__ __forceinline__ void warp_allreduce_sum(float (&x)[N]) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] += __shfl_xor_sync(0xffffffffu, x[i], offset);
  }
}

struct Gates {
  float g;     // decay
  float beta;  // update strength
};

// softplus uses torch's default threshold: x > 20 -> x (log1p(exp(x)) == x in fp32 there).
__device__ __forceinline__ Gates compute_gates(float A_log, float dt_bias, float a, float b) {
  const float x = a + dt_bias;
  const float softplus = x > 20.0f ? x : log1pf(expf(x));
  Gates gates;
  gates.g = expf(-expf(A_log) * softplus);
  gates.beta = 1.0f / (1.0f + expf(-b));
  return gates;
}

// ---------------------------------------------------------------- kernel

// Tensor element offsets (all tensors contiguous):
//   q, k      [B, 1, HQ, K]   : (batch * HQ + hq) * K + kk
//   v, output [B, 1, HV, V]   : (batch * HV + hv) * V + vv  = head * V + vv
//   state     [B, HV, V, K]   : ((batch * HV + hv) * V + vv) * K + kk = (head * V + vv) * K + kk
//   a, b      [B, 1, HV]      : batch * HV + hv = head
//   A_log, dt_bias [HV]       : hv
__global__ void __launch_bounds__(kWarpSize)
gdn_decode_v1_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                     const uint16_t* __restrict__ v, const float* __restrict__ state,
                     const float* __restrict__ A_log, const uint16_t* __restrict__ a,
                     const float* __restrict__ dt_bias, const uint16_t* __restrict__ b,
                     float scale, uint16_t* __restrict__ output, float* __restrict__ new_state) {
  const int lane = threadIdx.x;                  // owns K columns [k0, k0 + 4)
  const int k0 = lane * kKPerLane;
  const int v0 = blockIdx.x * kRowsPerBlock;     // owns V rows [v0, v0 + 8)
  const int hv = blockIdx.y;
  const int batch = blockIdx.z;
  const int hq = hv / kGroup;                    // GVA: q/k head h / 2 serves v head h
  const int64_t head = static_cast<int64_t>(batch) * kNumVHeads + hv;

  // Issue every global load before any arithmetic: the 8 state rows (the
  // DRAM traffic) first, then the small operands, so their latencies overlap.
  const int64_t tile = (head * kHeadV + v0) * kHeadK + k0;  // state[batch, hv, v0, k0]
  float4 s[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
    // Row v0 + r; 16-byte aligned: rows are 512 B apart and k0 * 4 B is a multiple of 16.
    s[r] = __ldcs(reinterpret_cast<const float4*>(state + tile + r * kHeadK));
  }
  const int64_t qk = (static_cast<int64_t>(batch) * kNumQKHeads + hq) * kHeadK + k0;
  const float4 q4 = load_bf16x4(q + qk);  // 8-byte aligned: k0 * 2 B is a multiple of 8
  const float4 k4 = load_bf16x4(k + qk);
  float vr[kRowsPerBlock];                 // v[batch, 0, hv, v0 + r]
  load_bf16x8(v + head * kHeadV + v0, vr);  // 16-byte aligned: v0 * 2 B is a multiple of 16
  const Gates gates = compute_gates(__ldg(A_log + hv), __ldg(dt_bias + hv), load_bf16(a + head),
                                    load_bf16(b + head));

  // Decay, then u = S k.
  float u[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
    s[r] = scale4(s[r], gates.g);
    u[r] = dot4(s[r], k4);
  }
  warp_allreduce_sum(u);

  // Rank-1 delta update, write the new state (streaming: never re-read by this
  // kernel), and partial o = S q with the updated rows.
  float o[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
    const float delta = gates.beta * (vr[r] - u[r]);
    s[r] = axpy4(delta, k4, s[r]);
    __stcs(reinterpret_cast<float4*>(new_state + tile + r * kHeadK), s[r]);
    o[r] = dot4(s[r], q4);
  }
  warp_allreduce_sum(o);

  if (lane == 0) store_bf16x8(output + head * kHeadV + v0, o, scale);
}

// ---------------------------------------------------------------- host side

// Address of element 0 (DLPack keeps a separate byte offset).
template <typename T>
T* data_of(const ffi::TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

// Throws ValueError unless t is a contiguous CUDA tensor on `device_id` with the given
// dtype and shape, whose data is `align`-byte aligned (needed by the vector accesses).
void check_tensor(const ffi::TensorView& t, const char* name, DLDataTypeCode code, int bits,
                  std::initializer_list<int64_t> shape, int device_id, uintptr_t align) {
  TVM_FFI_CHECK(t.device().device_type == kDLCUDA && t.device().device_id == device_id, ValueError)
      << name << " must be on cuda:" << device_id;
  TVM_FFI_CHECK(t.dtype().code == code && t.dtype().bits == bits && t.dtype().lanes == 1, ValueError)
      << name << " has the wrong dtype (want " << (code == kDLBfloat ? "bfloat16" : "float32") << ")";
  TVM_FFI_CHECK(t.ndim() == static_cast<int>(shape.size()), ValueError)
      << name << " must have " << shape.size() << " dims, has " << t.ndim();
  int dim = 0;
  for (int64_t extent : shape) {
    TVM_FFI_CHECK(t.size(dim) == extent, ValueError)
        << name << " dim " << dim << " is " << t.size(dim) << ", want " << extent;
    ++dim;
  }
  TVM_FFI_CHECK(t.IsContiguous(), ValueError) << name << " must be contiguous";
  TVM_FFI_CHECK(reinterpret_cast<uintptr_t>(data_of<char>(t)) % align == 0, ValueError)
      << name << " must be " << align << "-byte aligned";
}

void gdn_decode(ffi::TensorView q, ffi::TensorView k, ffi::TensorView v, ffi::TensorView state,
                ffi::TensorView A_log, ffi::TensorView a, ffi::TensorView dt_bias,
                ffi::TensorView b, double scale, ffi::TensorView output,
                ffi::TensorView new_state) {
  TVM_FFI_CHECK(q.ndim() == 4, ValueError) << "q must be [B, 1, 4, 128]";
  const int64_t batch = q.size(0);
  const int device_id = q.device().device_id;
  check_tensor(q, "q", kDLBfloat, 16, {batch, 1, kNumQKHeads, kHeadK}, device_id, 8);
  check_tensor(k, "k", kDLBfloat, 16, {batch, 1, kNumQKHeads, kHeadK}, device_id, 8);
  check_tensor(v, "v", kDLBfloat, 16, {batch, 1, kNumVHeads, kHeadV}, device_id, 16);
  check_tensor(state, "state", kDLFloat, 32, {batch, kNumVHeads, kHeadV, kHeadK}, device_id, 16);
  check_tensor(A_log, "A_log", kDLFloat, 32, {kNumVHeads}, device_id, 4);
  check_tensor(a, "a", kDLBfloat, 16, {batch, 1, kNumVHeads}, device_id, 2);
  check_tensor(dt_bias, "dt_bias", kDLFloat, 32, {kNumVHeads}, device_id, 4);
  check_tensor(b, "b", kDLBfloat, 16, {batch, 1, kNumVHeads}, device_id, 2);
  check_tensor(output, "output", kDLBfloat, 16, {batch, 1, kNumVHeads, kHeadV}, device_id, 16);
  check_tensor(new_state, "new_state", kDLFloat, 32, {batch, kNumVHeads, kHeadV, kHeadK},
               device_id, 16);
  TVM_FFI_CHECK(batch <= 65535, ValueError) << "batch " << batch << " exceeds gridDim.z";
  if (batch == 0) return;

  const float scale_f = scale == 0.0 ? kDefaultScale : static_cast<float>(scale);
  ffi::CUDADeviceGuard guard(device_id);
  // The caller's stream (torch's current stream when called with torch tensors).
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device_id));
  const dim3 grid(kHeadV / kRowsPerBlock, kNumVHeads, static_cast<unsigned>(batch));
  gdn_decode_v1_kernel<<<grid, kWarpSize, 0, stream>>>(
      data_of<const uint16_t>(q), data_of<const uint16_t>(k), data_of<const uint16_t>(v),
      data_of<const float>(state), data_of<const float>(A_log), data_of<const uint16_t>(a),
      data_of<const float>(dt_bias), data_of<const uint16_t>(b), scale_f,
      data_of<uint16_t>(output), data_of<float>(new_state));
  TVM_FFI_CHECK_CUDA_ERROR(cudaGetLastError());
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gdn_decode, gdn_decode);
