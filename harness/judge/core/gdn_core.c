/*
 * The timing core: the part of the worker that a solution's Python cannot patch.
 *
 * A CPython extension (module _gdn_core), compiled by the judge at run start
 * (harness/judge/core.py) and imported by the worker before the solution is.
 * It holds, in C memory that no Python object refers to:
 *   - a 32-byte key the judge wrote into a pipe (read here, never by Python);
 *   - every input and output buffer of a workload (host memory, or device
 *     memory from the CUDA driver), handed to the solution as torch tensors
 *     through DLPack;
 *   - the mapping of the capture area, a memfd the judge reads.
 * and it runs every timed call itself: makes the call's inputs from the key
 * (they exist nowhere before that), restores the stored inputs, poisons the
 * destinations with NaN, flushes L2, starts the timer, calls run(), stops the
 * timer and copies the destinations into the capture area, in stream order
 * right after the call. Its own GPU work goes on a stream of its own, so the
 * CUPTI tier, which the core records itself (libcupti, loaded here), counts
 * every other kernel, copy and fill of the process from the moment a call's
 * inputs start to be made until its outputs are captured. Each call takes the
 * next of a few sets of buffers, each allocated apart: where a buffer lies
 * moved a call's time by up to 8% at B = 4-16 on an H100
 * (results/judge-check/20261125-H100-cupti-core), and the worker's own loop,
 * which takes fresh buffers from torch's allocator, averaged over placements
 * the same way. The judge authorizes each chunk of calls with a
 * command it signs (HMAC-SHA256, a sequence number the core checks, so no
 * command runs twice), and the core signs what it returns: the samples, and a
 * secret sample of the captured words, so a capture rewritten afterwards is
 * seen. docs/judging.md has the threat model and what remains (native code in
 * this address space can still find this module's memory).
 *
 * Layouts of commands and results: harness/judge/core.py (the one other
 * reader and writer of them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ SHA-256 and HMAC */

typedef struct { uint32_t h[8]; uint64_t len; uint8_t buf[64]; size_t fill; } sha256_ctx;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256_ctx *c, const uint8_t *p) {
    uint32_t w[64], a, b, d, e, f, g, h, cc;
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = c->h[0]; b = c->h[1]; cc = c->h[2]; d = c->h[3]; e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g; g = f; f = e; e = d + t1; d = cc; cc = b; b = a; a = t1 + t2;
    }
    c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d; c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

static void sha256_init(sha256_ctx *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->len = 0;
    c->fill = 0;
}

static void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->len += n;
    while (n) {
        size_t take = 64 - c->fill < n ? 64 - c->fill : n;
        memcpy(c->buf + c->fill, p, take);
        c->fill += take; p += take; n -= take;
        if (c->fill == 64) { sha256_block(c, c->buf); c->fill = 0; }
    }
}

static void sha256_final(sha256_ctx *c, uint8_t out[32]) {
    uint64_t bits = c->len * 8;
    uint8_t pad = 0x80, zero = 0, lenbe[8];
    sha256_update(c, &pad, 1);
    while (c->fill != 56) sha256_update(c, &zero, 1);
    for (int i = 0; i < 8; i++) lenbe[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, lenbe, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24); out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8); out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

static uint8_t g_key[32];

/* HMAC-SHA256 of the concatenation of two byte strings under g_key. */
static void hmac2(const void *a, size_t na, const void *b, size_t nb, uint8_t out[32]) {
    uint8_t ipad[64], opad[64], inner[32];
    memset(ipad, 0x36, 64); memset(opad, 0x5c, 64);
    for (int i = 0; i < 32; i++) { ipad[i] ^= g_key[i]; opad[i] ^= g_key[i]; }
    sha256_ctx c;
    sha256_init(&c); sha256_update(&c, ipad, 64); sha256_update(&c, a, na); sha256_update(&c, b, nb);
    sha256_final(&c, inner);
    sha256_init(&c); sha256_update(&c, opad, 64); sha256_update(&c, inner, 32); sha256_final(&c, out);
}

/* A 64-bit secret seed for (domain, four numbers): the first 8 bytes of their HMAC, little-endian. */
static uint64_t seed_of(uint32_t domain, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t msg[5] = {domain, a, b, c, d};
    uint8_t mac[32];
    uint64_t s;
    hmac2(msg, sizeof msg, NULL, 0, mac);
    memcpy(&s, mac, 8);
    return s;
}

/* ------------------------------------------------------------------ random inputs */

/* splitmix64's output function: element j of a stream draws mix(seed + (j + 1) * golden). */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* An approximately standard-normal float (Irwin-Hall of four uniforms): every step exact in
 * float32 but the last product, so the judge computes the same bits in torch (harness/judge/core.py). */
static inline float normal_of(uint64_t x) {
    float s = 0.0f;
    for (int lane = 0; lane < 4; lane++) s += ((float)((x >> (16 * lane)) & 0xffff) + 0.5f) * (1.0f / 65536.0f);
    return (s - 2.0f) * 1.7320508f;
}

static inline uint16_t bf16_of(float f) { /* round to nearest even; no NaN reaches here */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

enum { DT_F32 = 1, DT_BF16 = 2 };

static void fill_range(void *dst, size_t begin, size_t end, int dtype, uint64_t seed) {
    for (size_t j = begin; j < end; j++) {
        float v = normal_of(mix64(seed + (uint64_t)(j + 1) * 0x9E3779B97F4A7C15ULL));
        if (dtype == DT_F32) ((float *)dst)[j] = v;
        else ((uint16_t *)dst)[j] = bf16_of(v);
    }
}

/* A random input of at least FILL_SPLIT_MIN elements is made by up to FILL_THREADS threads: one
 * core makes B = 64's state (8.4 M elements) in about 31 ms, which was most of a judged
 * workload's wall time at large B (every timed call gets fresh inputs). Each element depends on
 * its index only, so the split changes no bit. */
#define FILL_SPLIT_MIN ((size_t)1 << 20)
#define FILL_THREADS 8

typedef struct { void *dst; size_t begin, end; int dtype; uint64_t seed; } FillPart;

static void *fill_part(void *arg) {
    FillPart *p = (FillPart *)arg;
    fill_range(p->dst, p->begin, p->end, p->dtype, p->seed);
    return NULL;
}

static void fill_random(void *dst, size_t numel, int dtype, uint64_t seed) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int parts = numel < FILL_SPLIT_MIN || cores < 2 ? 1 : (int)(cores < FILL_THREADS ? cores : FILL_THREADS);
    pthread_t ids[FILL_THREADS];
    FillPart part[FILL_THREADS];
    int started[FILL_THREADS] = {0};
    size_t per = (numel + (size_t)parts - 1) / (size_t)parts;
    for (int t = 0; t < parts; t++) {
        size_t begin = (size_t)t * per, end = begin + per < numel ? begin + per : numel;
        part[t] = (FillPart){dst, begin, end, dtype, seed};
        if (t > 0 && pthread_create(&ids[t], NULL, fill_part, &part[t]) == 0) started[t] = 1;
        else if (t > 0) fill_part(&part[t]);  /* no thread to be had: this one makes it */
    }
    fill_part(&part[0]);
    for (int t = 1; t < parts; t++)
        if (started[t]) pthread_join(ids[t], NULL);
}

/* ------------------------------------------------------------------ the CUDA driver, loaded at arm */

typedef int CUresult;
typedef uintptr_t CUdeviceptr;
typedef void *CUevent;
typedef void *CUstream;
typedef void *CUcontext;
typedef struct {
    size_t srcXInBytes, srcY; int srcMemoryType; const void *srcHost; CUdeviceptr srcDevice; void *srcArray; size_t srcPitch;
    size_t dstXInBytes, dstY; int dstMemoryType; void *dstHost; CUdeviceptr dstDevice; void *dstArray; size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2 };

static struct {
    CUresult (*ctxGetCurrent)(CUcontext *);
    CUresult (*memAlloc)(CUdeviceptr *, size_t);
    CUresult (*memFree)(CUdeviceptr);
    CUresult (*memAllocHost)(void **, size_t);
    CUresult (*memFreeHost)(void *);
    CUresult (*memHostRegister)(void *, size_t, unsigned);
    CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*memcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*memcpy2DAsync)(const CUDA_MEMCPY2D *, CUstream);
    CUresult (*memsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*memsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
    CUresult (*eventCreate)(CUevent *, unsigned);
    CUresult (*eventRecord)(CUevent, CUstream);
    CUresult (*streamCreate)(CUstream *, unsigned);
    CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*eventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*ctxSynchronize)(void);
    CUresult (*getErrorString)(CUresult, const char **);
} cu;

static int cu_failed(CUresult r, const char *what) {
    if (r == 0) return 0;
    const char *text = "unknown";
    if (cu.getErrorString) cu.getErrorString(r, &text);
    PyErr_Format(PyExc_RuntimeError, "timing core: %s failed: CUDA error %d (%s)", what, r, text);
    return 1;
}
#define CU(call, what) do { if (cu_failed((call), (what))) return -1; } while (0)

static int load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { PyErr_Format(PyExc_RuntimeError, "timing core: cannot load libcuda.so.1: %s", dlerror()); return -1; }
#define SYM(field, name) do { *(void **)&cu.field = dlsym(lib, name); \
        if (!cu.field) { PyErr_Format(PyExc_RuntimeError, "timing core: libcuda lacks %s", name); return -1; } } while (0)
    SYM(ctxGetCurrent, "cuCtxGetCurrent"); SYM(memAlloc, "cuMemAlloc_v2"); SYM(memFree, "cuMemFree_v2");
    SYM(memAllocHost, "cuMemAllocHost_v2"); SYM(memFreeHost, "cuMemFreeHost"); SYM(memHostRegister, "cuMemHostRegister_v2");
    SYM(memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"); SYM(memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    SYM(memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"); SYM(memcpy2DAsync, "cuMemcpy2DAsync_v2");
    SYM(memsetD32Async, "cuMemsetD32Async"); SYM(memsetD16Async, "cuMemsetD16Async");
    SYM(eventCreate, "cuEventCreate"); SYM(eventRecord, "cuEventRecord"); SYM(ctxSynchronize, "cuCtxSynchronize");
    SYM(streamCreate, "cuStreamCreate"); SYM(streamWaitEvent, "cuStreamWaitEvent");
    SYM(getErrorString, "cuGetErrorString");
    *(void **)&cu.eventElapsedTime = dlsym(lib, "cuEventElapsedTime_v2");
    if (!cu.eventElapsedTime) SYM(eventElapsedTime, "cuEventElapsedTime");
#undef SYM
    return 0;
}

/* ------------------------------------------------------------------ state */

#define MAX_TENSORS 16
#define MAX_DIMS 6
#define MAX_EVENTS 64
#define MAX_SETS 8                             /* buffer sets a workload's calls take in turn */
#define SET_BYTES ((size_t)2 << 30)            /* the sets of one workload share this many bytes */
#define WORDS_PER_CALL 256
#define STAGING_BYTES ((size_t)256 << 20)
#define MAGIC 0x43444e47u /* "GNDC" little-endian: commands and results */

enum { K_NONE = 0, K_RANDOM = 1, K_STORED = 2 };
enum { SCALE_NONE = 0, SCALE_GIVEN = 1, SCALE_LEFT_OUT = 2 };
enum { CMD_WORKLOAD = 1, CMD_CHUNK = 2 };
/* Code 2 was the core's copy of the contest's original sync loop; the sync tier is now
 * flashinfer-bench's own loop, called in the worker (harness/judge/timing/sync.py). */
enum { TIER_WALLCLOCK = 0, TIER_EVENTS = 1, TIER_CUPTI = 3 };
/* Flushes queued before an events-tier call: its lead over the host's launch (ready_call). */
#define EVENTS_LEAD_FLUSHES 4
enum { MODE_WARM = 0, MODE_TIMED = 1 };
enum { CU_STREAM_NON_BLOCKING = 1 };

typedef struct {
    char name[32];
    int kind, dtype, ndim;
    int64_t shape[MAX_DIMS];
    size_t nbytes, numel, row_bytes;
    uint32_t stride;         /* outputs: capture one row in `stride` (1: every row) */
    void *host;              /* CPU run: the buffer; GPU run: pinned staging of a random input, `slots` calls' worth */
    size_t slots;
    CUdeviceptr dev[MAX_SETS];   /* GPU run: the buffer of each set */
    void *pristine;          /* stored inputs: host copy (CPU) */
    CUdeviceptr pristine_dev;
    PyObject *tensor[MAX_SETS];  /* what the solution is handed, per set */
} Slot;

static struct {
    int armed, gpu, device_index;
    uint64_t seq;                     /* the next command's sequence number */
    uint8_t *area; size_t area_size;  /* the capture area */
    CUdeviceptr flush; size_t flush_bytes, cupti_flush_bytes; /* the buffer; the CUPTI tier zeroes its first cupti_flush_bytes */
    CUstream stream;                  /* the core's own GPU work: inputs, poison, flush, capture */
    CUevent ready, ran;               /* the core's stream and the solution's (stream 0) wait on each other */
    CUevent start[MAX_EVENTS], end[MAX_EVENTS];
    PyObject *from_dlpack, *run;
    int hands_over;                   /* run returns its results' data pointers for the core to copy */
    uint64_t returned[MAX_TENSORS];   /* ... those of the last call (0: the result is its destination) */
    /* the workload */
    int loaded, n_in, n_out, scale_kind, n_sets;  /* scale_kind: SCALE_NONE, SCALE_GIVEN, SCALE_LEFT_OUT */
    uint64_t nonce;
    double scale;
    Slot in[MAX_TENSORS], out[MAX_TENSORS];
    CUdeviceptr pool[MAX_SETS];       /* one allocation per buffer set, every slot of the set within it */
} S;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ------------------------------------------------------------------ CUPTI, loaded at arm */

/* The CUPTI tier's figure: every kernel, memcpy and memset of this process that is not on the
 * core's stream, clipped to the call's window (from before its inputs are made to after its
 * outputs are captured, the GPU idle at both ends), summed; also the span (first start to last
 * end) and the count. A kernel launched from another thread or stream, or left running from an
 * earlier call, counts in every window it overlaps. No Python runs in any of it.
 *
 * The records are read at these byte offsets (cupti_activity.h of CUDA 13.0: CUpti_ActivityKernel10,
 * CUpti_ActivityMemcpy6, CUpti_ActivityMemset4; earlier versions share them; tests/judge/test_core.py
 * checks them against the header where it is installed). */
#define CUPTI_KIND_MEMCPY 1
#define CUPTI_KIND_MEMSET 2
#define CUPTI_KIND_CONCURRENT_KERNEL 10
#define CUPTI_START_AT 16
#define CUPTI_END_AT 24
#define CUPTI_KERNEL_STREAM_AT 48
#define CUPTI_COPY_STREAM_AT 40
#define CUPTI_KERNEL_NAME_AT 104
#define CUPTI_FLUSH_FORCED 1
#define CUPTI_BUFFER_BYTES ((size_t)8 << 20)
#define MAX_NAMES 8
#define UNTIMED_CHUNK (-1.0) /* the records count of every call of a chunk CUPTI could not time (core.py) */

typedef struct { uint64_t start, end; uint32_t stream, kind; const char *name; } Work;

static struct {
    int (*registerCallbacks)(void (*)(uint8_t **, size_t *, size_t *), void (*)(CUcontext, uint32_t, uint8_t *, size_t, size_t));
    int (*enable)(int), (*disable)(int), (*flushAll)(uint32_t), (*finalize)(void);
    int (*nextRecord)(uint8_t *, size_t, void **);
    int (*timestamp)(uint64_t *);
    int (*streamId)(CUcontext, CUstream, uint8_t, uint32_t *);
    int (*dropped)(CUcontext, uint32_t, size_t *);
    char missing[512];                /* why CUPTI cannot record here ("" when it can) */
    int on;                           /* recording (kinds enabled, our callbacks registered) */
    uint32_t core_stream;             /* CUPTI's id of the core's stream */
    pthread_mutex_t lock;             /* the completion callback may run on CUPTI's thread */
    Work *work; size_t n, cap;
    int lost;                         /* records dropped, or no memory for them */
    const char *names[MAX_NAMES]; int n_names;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, CUPTI_BUFFER_BYTES);
    *size = *buffer ? CUPTI_BUFFER_BYTES : 0;
    *max_records = 0;
}

static void buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    void *record = NULL;
    (void)size;
    pthread_mutex_lock(&C.lock);
    while (valid && C.nextRecord(buffer, valid, &record) == 0) {
        uint32_t kind;
        memcpy(&kind, record, 4);
        if (kind != CUPTI_KIND_CONCURRENT_KERNEL && kind != CUPTI_KIND_MEMCPY && kind != CUPTI_KIND_MEMSET) continue;
        if (C.n == C.cap) {
            size_t cap = C.cap ? 2 * C.cap : 4096;
            Work *grown = realloc(C.work, cap * sizeof *grown);
            if (!grown) { C.lost = 1; continue; }
            C.work = grown; C.cap = cap;
        }
        Work *w = &C.work[C.n++];
        const uint8_t *r = record;
        memcpy(&w->start, r + CUPTI_START_AT, 8);
        memcpy(&w->end, r + CUPTI_END_AT, 8);
        memcpy(&w->stream, r + (kind == CUPTI_KIND_CONCURRENT_KERNEL ? CUPTI_KERNEL_STREAM_AT : CUPTI_COPY_STREAM_AT), 4);
        w->kind = kind;
        w->name = NULL;
        if (kind == CUPTI_KIND_CONCURRENT_KERNEL) memcpy(&w->name, r + CUPTI_KERNEL_NAME_AT, sizeof w->name);
    }
    size_t dropped = 0;
    if (C.dropped && C.dropped(ctx, stream, &dropped) == 0 && dropped) C.lost = 1;
    pthread_mutex_unlock(&C.lock);
    free(buffer);
}

/* libcupti: the copy this process has loaded already (torch's), else `path`; CUPTI then "missing"
 * with the reason (the tier is reported unavailable, never timed another way). */
static void load_cupti(const char *path) {
    void *lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!lib && path && *path) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(C.missing, sizeof C.missing, "libcupti cannot be loaded (%s)", path && *path ? dlerror() : "none found");
        return;
    }
#define CSYM(field, name) do { *(void **)&C.field = dlsym(lib, name); \
        if (!C.field) { snprintf(C.missing, sizeof C.missing, "libcupti lacks %s", name); return; } } while (0)
    CSYM(registerCallbacks, "cuptiActivityRegisterCallbacks"); CSYM(enable, "cuptiActivityEnable");
    CSYM(disable, "cuptiActivityDisable"); CSYM(flushAll, "cuptiActivityFlushAll"); CSYM(finalize, "cuptiFinalize");
    CSYM(nextRecord, "cuptiActivityGetNextRecord"); CSYM(timestamp, "cuptiGetTimestamp");
    CSYM(streamId, "cuptiGetStreamIdEx"); CSYM(dropped, "cuptiActivityGetNumDroppedRecords");
#undef CSYM
}

static int cupti_failed(int r, const char *what) {
    if (r == 0) return 0;
    PyErr_Format(PyExc_RuntimeError, "timing core: CUPTI %s failed: error %d", what, r);
    return 1;
}

static const int RECORDED_KINDS[] = {CUPTI_KIND_CONCURRENT_KERNEL, CUPTI_KIND_MEMCPY, CUPTI_KIND_MEMSET};

/* Recording on: our callbacks registered again (a profiler may have taken them), the kinds on.
 * CONCURRENT_KERNEL, not KERNEL: KERNEL serializes kernels and would change what is measured. */
static int cupti_on(void) {
    if (C.on) return 0;
    CUcontext ctx = NULL;
    if (cupti_failed(C.registerCallbacks(buffer_requested, buffer_completed), "callback registration")) return -1;
    for (size_t i = 0; i < sizeof RECORDED_KINDS / sizeof *RECORDED_KINDS; i++)
        if (cupti_failed(C.enable(RECORDED_KINDS[i]), "activity enable")) return -1;
    C.on = 1;
    CU(cu.ctxGetCurrent(&ctx), "cuCtxGetCurrent");
    if (cupti_failed(C.streamId(ctx, S.stream, 0, &C.core_stream), "stream id")) return -1;
    return 0;
}

/* Recording off, and CUPTI detached from the process: with its kinds only disabled, libcupti stays
 * attached, and one call's host time after it (the sync tier's launches) ran a median 8-12% longer
 * (results/proof/20261127-H100-host-path-6470d35, 15-16 of 17 points). FlashInfer's timer detaches
 * too, so the tiers that hold the host run as they would in a plain process. The next cupti_on
 * attaches again (any CUPTI call does). */
static void cupti_off(void) {
    if (!C.on) return;
    for (size_t i = 0; i < sizeof RECORDED_KINDS / sizeof *RECORDED_KINDS; i++) C.disable(RECORDED_KINDS[i]);
    C.flushAll(CUPTI_FLUSH_FORCED);
    C.finalize();
    C.on = 0;
}

/* Deliver every record so far (the GPU idle) and forget them: a chunk starts from nothing. */
static void cupti_forget(void) {
    C.flushAll(CUPTI_FLUSH_FORCED);
    pthread_mutex_lock(&C.lock);
    C.n = 0; C.lost = 0; C.n_names = 0;
    pthread_mutex_unlock(&C.lock);
}

static void note_name(const char *name) {
    if (!name) return;
    for (int i = 0; i < C.n_names; i++) if (C.names[i] == name || !strcmp(C.names[i], name)) return;
    if (C.n_names < MAX_NAMES) C.names[C.n_names++] = name;
}

/* Calls 0 .. count - 1 in windows [lo[k], hi[k]] (CUPTI ns): their samples (µs of work summed),
 * spans (µs) and record counts. A call CUPTI saw nothing of has 0 records, which the judge
 * refuses after it has checked the call's outputs (a wrong output is the clearer verdict).
 * CUPTI may deliver a kernel record with no timestamps ("a value of 0 for both the start and
 * end timestamps indicates that timestamp information could not be collected",
 * CUpti_ActivityKernel), or a forced flush an unfinished one (end before start). Such a record
 * belongs to some call of the chunk, but to which one its time cannot say: every call of the
 * chunk then gets UNTIMED_CHUNK records and no figure, and the judge times the chunk again on
 * fresh calls (harness/judge/core_tier.py). Seen once in 220 workloads on an H100 (an honest
 * kernel's call, rejected as "recorded no kernel" before this). */
static int cupti_attribute(uint32_t count, const uint64_t *lo, const uint64_t *hi, double *samples,
                           double *spans, double *records) {
    C.flushAll(CUPTI_FLUSH_FORCED);
    uint64_t first[MAX_EVENTS], last[MAX_EVENTS];
    for (uint32_t k = 0; k < count; k++) { samples[k] = 0; records[k] = 0; first[k] = UINT64_MAX; last[k] = 0; }
    pthread_mutex_lock(&C.lock);
    int lost = C.lost, untimed = 0;
    for (size_t i = 0; i < C.n; i++) {
        Work *w = &C.work[i];
        if (w->stream == C.core_stream) continue;
        if (w->start == 0 || w->end < w->start) { untimed = 1; continue; }
        for (uint32_t k = 0; k < count; k++) {
            uint64_t a = w->start > lo[k] ? w->start : lo[k], b = w->end < hi[k] ? w->end : hi[k];
            if (b <= a) continue;
            samples[k] += (double)(b - a);
            records[k] += 1;
            if (a < first[k]) first[k] = a;
            if (b > last[k]) last[k] = b;
            note_name(w->name);
        }
    }
    pthread_mutex_unlock(&C.lock);
    if (lost) {
        PyErr_SetString(PyExc_RuntimeError, "timing core: CUPTI dropped records; refusing a CUPTI figure");
        return -1;
    }
    for (uint32_t k = 0; k < count; k++) {
        samples[k] = untimed ? 0.0 : samples[k] / 1e3;
        spans[k] = !untimed && records[k] ? (double)(last[k] - first[k]) / 1e3 : 0.0;
        if (untimed) records[k] = UNTIMED_CHUNK;
    }
    return 0;
}

/* ------------------------------------------------------------------ DLPack */

typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct { void *data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t *shape, *strides; uint64_t byte_offset; } DLTensor;
typedef struct DLManagedTensor { DLTensor dl_tensor; void *manager_ctx; void (*deleter)(struct DLManagedTensor *); } DLManagedTensor;

static void dl_delete(DLManagedTensor *m) { free(m->dl_tensor.shape); free(m); } /* the data is the core's */

static void capsule_destructor(PyObject *capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) { /* never consumed */
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
        if (m) m->deleter(m);
    }
}

static PyObject *as_tensor(Slot *s, int set) {
    DLManagedTensor *m = calloc(1, sizeof *m);
    int64_t *shape = calloc(MAX_DIMS * 2, sizeof(int64_t));
    if (!m || !shape) { free(m); free(shape); return PyErr_NoMemory(); }
    int64_t stride = 1;
    for (int d = s->ndim - 1; d >= 0; d--) { shape[d] = s->shape[d]; shape[MAX_DIMS + d] = stride; stride *= s->shape[d]; }
    m->dl_tensor.data = S.gpu ? (void *)s->dev[set] : s->host;
    m->dl_tensor.device.device_type = S.gpu ? 2 : 1;
    m->dl_tensor.device.device_id = S.gpu ? S.device_index : 0;
    m->dl_tensor.ndim = s->ndim;
    m->dl_tensor.dtype.code = s->dtype == DT_F32 ? 2 : 4;
    m->dl_tensor.dtype.bits = s->dtype == DT_F32 ? 32 : 16;
    m->dl_tensor.dtype.lanes = 1;
    m->dl_tensor.shape = shape;
    m->dl_tensor.strides = shape + MAX_DIMS;
    m->deleter = dl_delete;
    PyObject *capsule = PyCapsule_New(m, "dltensor", capsule_destructor);
    if (!capsule) { dl_delete(m); return NULL; }
    PyObject *tensor = PyObject_CallOneArg(S.from_dlpack, capsule);
    Py_DECREF(capsule);
    return tensor;
}

/* ------------------------------------------------------------------ commands */

typedef struct { const uint8_t *p; size_t left; int bad; } Reader;

static uint64_t take(Reader *r, size_t n) {
    uint64_t v = 0;
    if (r->left < n) { r->bad = 1; return 0; }
    memcpy(&v, r->p, n);
    r->p += n; r->left -= n;
    return v;
}

/* Check a command's HMAC (its last 32 bytes) and sequence number; a reader over its body. */
static int open_command(PyObject *bytes, int want_kind, Reader *r) {
    char *data; Py_ssize_t n;
    if (PyBytes_AsStringAndSize(bytes, &data, &n) < 0) return -1;
    if (n < 32 + 16) { PyErr_SetString(PyExc_ValueError, "timing core: command too short"); return -1; }
    uint8_t mac[32];
    hmac2(data, (size_t)n - 32, NULL, 0, mac);
    uint8_t diff = 0;
    for (int i = 0; i < 32; i++) diff |= mac[i] ^ (uint8_t)data[n - 32 + i];
    if (diff) { PyErr_SetString(PyExc_PermissionError, "timing core: a command the judge did not sign"); return -1; }
    r->p = (const uint8_t *)data; r->left = (size_t)n - 32; r->bad = 0;
    uint32_t magic = (uint32_t)take(r, 4), kind = (uint32_t)take(r, 4);
    uint64_t seq = take(r, 8);
    if (magic != MAGIC || (int)kind != want_kind || seq != S.seq) {
        PyErr_Format(PyExc_PermissionError, "timing core: command out of turn (kind %u, sequence %llu, expected %llu)",
                     kind, (unsigned long long)seq, (unsigned long long)S.seq);
        return -1;
    }
    S.seq++;
    return 0;
}

/* ------------------------------------------------------------------ workload buffers */

static void free_slot(Slot *s) {
    for (int set = 0; set < MAX_SETS; set++) Py_CLEAR(s->tensor[set]);
    if (S.gpu) { /* s->dev[] lie in the sets' pools (unload frees them) */
        if (s->pristine_dev) cu.memFree(s->pristine_dev);
        if (s->host) cu.memFreeHost(s->host);
    } else {
        free(s->host);
    }
    free(s->pristine);
    memset(s, 0, sizeof *s);
}

static void unload(void) {
    for (int i = 0; i < S.n_in; i++) free_slot(&S.in[i]);
    for (int i = 0; i < S.n_out; i++) free_slot(&S.out[i]);
    for (int set = 0; set < MAX_SETS; set++) if (S.pool[set]) { cu.memFree(S.pool[set]); S.pool[set] = 0; }
    S.n_in = S.n_out = 0;
    S.loaded = 0;
}

static int read_slot(Reader *r, Slot *s, int output) {
    size_t len = (size_t)take(r, 2);
    if (len >= sizeof s->name || r->left < len) { r->bad = 1; return -1; }
    memcpy(s->name, r->p, len); s->name[len] = 0; r->p += len; r->left -= len;
    s->kind = (int)take(r, 1); s->dtype = (int)take(r, 1); s->ndim = (int)take(r, 1);
    s->stride = output ? (uint32_t)take(r, 4) : 1;
    if (s->ndim > MAX_DIMS || (s->dtype != DT_F32 && s->dtype != DT_BF16) || s->stride == 0) { r->bad = 1; return -1; }
    s->numel = 1;
    for (int d = 0; d < s->ndim; d++) { s->shape[d] = (int64_t)take(r, 8); s->numel *= (size_t)s->shape[d]; }
    s->nbytes = s->numel * (s->dtype == DT_F32 ? 4 : 2);
    s->row_bytes = s->ndim ? (size_t)s->shape[s->ndim - 1] * (s->dtype == DT_F32 ? 4 : 2) : s->nbytes;
    return r->bad ? -1 : 0;
}

/* The bytes a slot takes in its set's pool: rounded up to POOL_ALIGN, as PyTorch's caching allocator
 * rounds a block, so a set lies as a PyTorch caller's small tensors do, side by side in one allocation.
 * Why: how a set's tensors lie against each other moves a B = 1 kernel by a CUPTI tick or two. The core
 * gave each tensor a cuMemAlloc of its own until 2026-11-28, which read cuda-v4 at B = 1 on an H200 a tick
 * over the same kernel on PyTorch's buffers, and the pooled layout within 3 ns of them
 * (tools/core_layout_probe.py, results/proof/20261128-H200-core-layout). PyTorch keeps tensors over 1 MB in
 * a pool apart from the small ones; this does not: a core that did bought nothing on two H100s and an H200
 * (results/judge-check/20261128-core-split-ab; docs/timing.md). */
#define POOL_ALIGN 512
static int has_buffer(const Slot *s) { return !(s->kind == K_NONE && s->nbytes == 0); }
/* Whether a slot gets buffers in each set: an input the call is given (not K_NONE), an output with a buffer. */
static int gets_buffers(const Slot *s, int output) { return output ? has_buffer(s) : s->kind != K_NONE; }
static size_t raw_bytes(const Slot *s) { return s->nbytes; }
static size_t pooled_bytes(const Slot *s) { return ((s->nbytes ? s->nbytes : 1) + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN; }

/* The bytes of one buffer set: `bytes` of every slot that gets buffers (raw_bytes, or pooled_bytes). */
static size_t set_bytes(size_t (*bytes)(const Slot *)) {
    size_t total = 0;
    for (int i = 0; i < S.n_in; i++) if (gets_buffers(&S.in[i], 0)) total += bytes(&S.in[i]);
    for (int i = 0; i < S.n_out; i++) if (gets_buffers(&S.out[i], 1)) total += bytes(&S.out[i]);
    return total;
}

/* One allocation per buffer set for every slot of the set: inputs, then outputs, in the command's order. */
static int alloc_pools(void) {
    size_t per_set = set_bytes(pooled_bytes);
    if (!S.gpu || !per_set) return 0;
    for (int set = 0; set < S.n_sets; set++) CU(cu.memAlloc(&S.pool[set], per_set), "cuMemAlloc (buffer set)");
    return 0;
}

/* The slot's buffers at *offset in each set's pool (advanced past it), its staging and pristine copies. */
static int alloc_slot(Slot *s, size_t *offset) {
    size_t n = s->nbytes ? s->nbytes : 1;
    if (S.gpu) {
        for (int set = 0; set < S.n_sets; set++) s->dev[set] = S.pool[set] + *offset;
        *offset += pooled_bytes(s);
        if (s->kind == K_RANDOM) { /* one staging slot per call of a chunk, within STAGING_BYTES */
            s->slots = STAGING_BYTES / n < 1 ? 1 : (STAGING_BYTES / n > MAX_EVENTS ? MAX_EVENTS : STAGING_BYTES / n);
            CU(cu.memAllocHost(&s->host, n * s->slots), "cuMemAllocHost");
        }
        if (s->kind == K_STORED) CU(cu.memAlloc(&s->pristine_dev, n), "cuMemAlloc");
    } else {
        s->host = malloc(n);
        if (!s->host) { PyErr_NoMemory(); return -1; }
    }
    if (s->kind == K_STORED && !S.gpu) {
        s->pristine = malloc(n);
        if (!s->pristine) { PyErr_NoMemory(); return -1; }
    }
    for (int set = 0; set < S.n_sets; set++)
        if (!(s->tensor[set] = as_tensor(s, set))) return -1;
    return 0;
}

/* As many buffer sets as fit in SET_BYTES, 1 to MAX_SETS (one on the CPU: no placement to vary). */
static int sets_for_workload(void) {
    size_t per_set = set_bytes(raw_bytes);
    if (!S.gpu || !per_set) return 1;
    size_t n = SET_BYTES / per_set;
    return n < 1 ? 1 : (n > MAX_SETS ? MAX_SETS : (int)n);
}

/* set_workload(command, stored): the workload's buffers; `stored` maps names to bytes-like objects. */
static PyObject *set_workload(PyObject *self, PyObject *args) {
    PyObject *command, *stored;
    if (!PyArg_ParseTuple(args, "SO!", &command, &PyDict_Type, &stored)) return NULL;
    if (!S.armed) { PyErr_SetString(PyExc_RuntimeError, "timing core: not armed"); return NULL; }
    Reader r;
    if (open_command(command, CMD_WORKLOAD, &r) < 0) return NULL;
    cupti_off();
    unload();
    S.nonce = take(&r, 8);
    S.scale_kind = (int)take(&r, 1);
    uint64_t scale_bits = take(&r, 8);
    memcpy(&S.scale, &scale_bits, 8);
    S.n_in = (int)take(&r, 1); S.n_out = (int)take(&r, 1);
    if (r.bad || S.n_in > MAX_TENSORS || S.n_out > MAX_TENSORS || S.scale_kind > SCALE_LEFT_OUT) goto malformed;
    for (int i = 0; i < S.n_in; i++) if (read_slot(&r, &S.in[i], 0) < 0) goto malformed;
    for (int i = 0; i < S.n_out; i++) if (read_slot(&r, &S.out[i], 1) < 0) goto malformed;
    if (r.left) goto malformed;
    S.n_sets = sets_for_workload();
    size_t offset = 0;
    if (alloc_pools() < 0) { unload(); return NULL; }
    for (int i = 0; i < S.n_in; i++) if (gets_buffers(&S.in[i], 0) && alloc_slot(&S.in[i], &offset) < 0) { unload(); return NULL; }
    for (int i = 0; i < S.n_out; i++) if (gets_buffers(&S.out[i], 1) && alloc_slot(&S.out[i], &offset) < 0) { unload(); return NULL; }
    for (int i = 0; i < S.n_in; i++) {
        Slot *s = &S.in[i];
        if (s->kind != K_STORED) continue;
        PyObject *data = PyDict_GetItemString(stored, s->name);
        Py_buffer view;
        if (!data || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
            PyErr_Format(PyExc_ValueError, "timing core: stored input %s missing or not bytes-like", s->name);
            unload(); return NULL;
        }
        if ((size_t)view.len != s->nbytes) {
            PyErr_Format(PyExc_ValueError, "timing core: stored input %s has %zd bytes, expected %zu", s->name, view.len, s->nbytes);
            PyBuffer_Release(&view); unload(); return NULL;
        }
        if (S.gpu) {
            if (cu_failed(cu.memcpyHtoDAsync(s->pristine_dev, view.buf, s->nbytes, S.stream), "cuMemcpyHtoDAsync") ||
                cu_failed(cu.ctxSynchronize(), "cuCtxSynchronize")) { PyBuffer_Release(&view); unload(); return NULL; }
        } else {
            memcpy(s->pristine, view.buf, s->nbytes);
        }
        PyBuffer_Release(&view);
    }
    S.loaded = 1;
    Py_RETURN_NONE;
malformed:
    unload();
    PyErr_SetString(PyExc_ValueError, "timing core: malformed workload command");
    return NULL;
}

/* ------------------------------------------------------------------ one call */

/* Make call `call`'s inputs (the k-th call of a chunk) in buffer set `set` and poison its
 * destinations, on the core's stream. On a GPU a random input goes through a pinned staging
 * slot, which waits for the device before it is reused (only an input too large for
 * STAGING_BYTES / chunk slots ever waits). */
static int prepare_call(uint32_t tier, uint64_t call, size_t k, int set) {
    for (int i = 0; i < S.n_in; i++) {
        Slot *s = &S.in[i];
        if (s->kind == K_RANDOM) {
            uint64_t seed = seed_of(1, S.nonce, tier, call, (uint64_t)i);
            if (S.gpu) {
                if (k && k % s->slots == 0) CU(cu.ctxSynchronize(), "cuCtxSynchronize");
                uint8_t *stage = (uint8_t *)s->host + (k % s->slots) * s->nbytes;
                fill_random(stage, s->numel, s->dtype, seed);
                CU(cu.memcpyHtoDAsync(s->dev[set], stage, s->nbytes, S.stream), "cuMemcpyHtoDAsync");
            } else {
                fill_random(s->host, s->numel, s->dtype, seed);
            }
        } else if (s->kind == K_STORED) {
            if (S.gpu) CU(cu.memcpyDtoDAsync(s->dev[set], s->pristine_dev, s->nbytes, S.stream), "cuMemcpyDtoDAsync");
            else memcpy(s->host, s->pristine, s->nbytes);
        }
    }
    for (int i = 0; i < S.n_out; i++) {
        Slot *o = &S.out[i];
        if (S.gpu) {
            if (o->dtype == DT_F32) CU(cu.memsetD32Async(o->dev[set], 0x7fc00000u, o->numel, S.stream), "cuMemsetD32Async");
            else CU(cu.memsetD16Async(o->dev[set], 0x7fc0, o->numel, S.stream), "cuMemsetD16Async");
        } else if (o->dtype == DT_F32) {
            for (size_t j = 0; j < o->numel; j++) ((uint32_t *)o->host)[j] = 0x7fc00000u;
        } else {
            for (size_t j = 0; j < o->numel; j++) ((uint16_t *)o->host)[j] = 0x7fc0;
        }
    }
    return 0;
}

/* run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state): the positional DPS entry
 * (harness/judge/dps.py), called as the contest calls it: the tensor inputs in definition order,
 * the scalar (the definition's last input) where the definition has one, then the destinations. */
static int take_pointers(PyObject *returned);

static int call_run(int set) {
    int n = S.n_in + (S.scale_kind != SCALE_NONE) + S.n_out, at = 0;
    PyObject *arguments = PyTuple_New(n);
    if (!arguments) return -1;
    for (int i = 0; i < S.n_in; i++) {
        PyObject *value = S.in[i].kind == K_NONE ? Py_None : S.in[i].tensor[set];
        Py_INCREF(value);
        PyTuple_SET_ITEM(arguments, at++, value);
    }
    if (S.scale_kind != SCALE_NONE) {
        PyObject *scale = S.scale_kind == SCALE_GIVEN ? PyFloat_FromDouble(S.scale) : (Py_INCREF(Py_None), Py_None);
        if (!scale) { Py_DECREF(arguments); return -1; }
        PyTuple_SET_ITEM(arguments, at++, scale);
    }
    for (int i = 0; i < S.n_out; i++) {
        Py_INCREF(S.out[i].tensor[set]);
        PyTuple_SET_ITEM(arguments, at++, S.out[i].tensor[set]);
    }
    PyObject *returned = PyObject_Call(S.run, arguments, NULL);
    Py_DECREF(arguments);
    if (!returned) return -1;
    int taken = take_pointers(returned);
    Py_DECREF(returned);
    return taken;
}

/* A value-returning entry's run (harness/judge/dps.py) returns one data pointer per output, as exact
 * ints: read without running any Python. Any other entry's return value is not looked at. */
static int take_pointers(PyObject *returned) {
    if (!S.hands_over) return 0;
    if (!PyTuple_CheckExact(returned) || PyTuple_GET_SIZE(returned) != S.n_out) {
        PyErr_Format(PyExc_TypeError, "timing core: a value-returning entry's run returns %d data pointers", S.n_out);
        return -1;
    }
    for (int i = 0; i < S.n_out; i++) {
        PyObject *pointer = PyTuple_GET_ITEM(returned, i);
        if (!PyLong_CheckExact(pointer)) {
            PyErr_SetString(PyExc_TypeError, "timing core: a data pointer that is not an int");
            return -1;
        }
        S.returned[i] = PyLong_AsUnsignedLongLong(pointer);
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

/* A value-returning call's results into its destinations (set `set`), once its timer has stopped: on
 * the core's stream (which CUPTI's sum leaves out, after the end event), after everything the
 * solution's stream was given; no Python runs. flashinfer-bench times a value-returning call without
 * any copy (docs/interop.md). */
static int deliver(int set) {
    if (!S.hands_over) return 0;
    if (S.gpu) {
        CU(cu.eventRecord(S.ran, 0), "cuEventRecord");
        CU(cu.streamWaitEvent(S.stream, S.ran, 0), "cuStreamWaitEvent");
    }
    for (int i = 0; i < S.n_out; i++) {
        Slot *o = &S.out[i];
        if (!S.returned[i]) continue;
        if (S.gpu) CU(cu.memcpyDtoDAsync(o->dev[set], (CUdeviceptr)S.returned[i], o->nbytes, S.stream), "cuMemcpyDtoDAsync (result)");
        else memcpy(o->host, (const void *)(uintptr_t)S.returned[i], o->nbytes);
    }
    return 0;
}

/* The rows of an output that call `call` captures: one in `stride`, from a secret phase. */
static size_t captured_rows(Slot *o, size_t phase) {
    size_t rows = o->nbytes / o->row_bytes;
    return phase < rows ? (rows - phase + o->stride - 1) / o->stride : 0;
}

static size_t capture_bytes_per_call(void) {
    size_t total = 0;
    for (int i = 0; i < S.n_out; i++) {
        Slot *o = &S.out[i];
        size_t rows = o->nbytes / o->row_bytes;
        total += (o->stride == 1 ? rows : (rows + o->stride - 1) / o->stride) * o->row_bytes;
    }
    return total;
}

/* Copy call `call`'s destinations (set `set`) into the capture area at `at`, on the core's stream
 * once the solution's stream has done everything it was given before (the call). */
static int capture(uint32_t tier, uint64_t call, uint8_t *at, int set) {
    if (S.gpu) {
        CU(cu.eventRecord(S.ran, 0), "cuEventRecord");
        CU(cu.streamWaitEvent(S.stream, S.ran, 0), "cuStreamWaitEvent");
    }
    for (int i = 0; i < S.n_out; i++) {
        Slot *o = &S.out[i];
        size_t phase = o->stride == 1 ? 0 : (size_t)(seed_of(2, S.nonce, tier, call, (uint64_t)i) % o->stride);
        size_t rows = captured_rows(o, phase), width = o->row_bytes, pitch = o->row_bytes * o->stride;
        if (S.gpu) {
            CUDA_MEMCPY2D m;
            memset(&m, 0, sizeof m);
            m.srcMemoryType = CU_MEMORYTYPE_DEVICE; m.srcDevice = o->dev[set] + phase * width; m.srcPitch = pitch;
            m.dstMemoryType = CU_MEMORYTYPE_HOST; m.dstHost = at; m.dstPitch = width;
            m.WidthInBytes = width; m.Height = rows;
            if (rows) CU(cu.memcpy2DAsync(&m, S.stream), "cuMemcpy2DAsync");
        } else {
            for (size_t r = 0; r < rows; r++) memcpy(at + r * width, (uint8_t *)o->host + (phase + r * o->stride) * width, width);
        }
        /* the area's layout per call is fixed by the largest phase-0 row count; pad the rest */
        size_t full = (o->stride == 1 ? o->nbytes / width : (o->nbytes / width + o->stride - 1) / o->stride);
        at += full * width;
    }
    return 0;
}

/* ------------------------------------------------------------------ run_chunk */

/* The flush before a call of `tier`: what the timer the tier names zeroes (harness.judge.timing.gpu_state.
 * flush_bytes_for): the CUPTI tier 2 x L2, as FlashInfer's CUPTI timer; the others at least 256 MB. */
static int flush_l2_on(uint32_t tier, CUstream stream) {
    size_t bytes = tier == TIER_CUPTI ? S.cupti_flush_bytes : S.flush_bytes;
    if (S.gpu && bytes) CU(cu.memsetD32Async(S.flush, 0, bytes / 4, stream), "cuMemsetD32Async (L2 flush)");
    return 0;
}

static int flush_l2(uint32_t tier) { return flush_l2_on(tier, S.stream); } /* the core's own stream */

/* The solution's stream (0) waits for what the core's stream was given (inputs, flush). */
static int hand_over(void) {
    if (!S.gpu) return 0;
    CU(cu.eventRecord(S.ready, S.stream), "cuEventRecord");
    CU(cu.streamWaitEvent(0, S.ready, 0), "cuStreamWaitEvent");
    return 0;
}

static int cupti_now(uint64_t *t) { return cupti_failed(C.timestamp(t), "timestamp") ? -1 : 0; }

/* Warm-up: back-to-back calls (inputs of a domain no timed call uses) for warm_ns or max_calls. */
static int warm(uint32_t tier, uint64_t warm_ns, uint32_t max_calls, uint32_t *calls, double *wall_ns) {
    double began = now_ns();
    *calls = 0;
    while (*calls == 0 || (now_ns() - began < (double)warm_ns && *calls < max_calls)) {
        int set = (int)(*calls % (uint32_t)S.n_sets);
        if (prepare_call(tier, (1ULL << 40) + *calls, *calls, set) < 0 || flush_l2(tier) < 0 || hand_over() < 0 ||
            call_run(set) < 0 || deliver(set) < 0) return -1;
        (*calls)++;
        if (S.gpu && *calls % 16 == 0) CU(cu.ctxSynchronize(), "cuCtxSynchronize"); /* a short queue: the deadline means GPU time */
    }
    if (S.gpu) CU(cu.ctxSynchronize(), "cuCtxSynchronize");
    *wall_ns = now_ns() - began;
    return 0;
}

/* The timed figures of a chunk's calls: samples (µs), host time of each run() call (ns), and for
 * the CUPTI tier the span (µs), the records counted and the events' bracket of the call (µs: the
 * judge checks that CUPTI saw the work the GPU did after run() returned). */
typedef struct {
    double samples[MAX_EVENTS], host_ns[MAX_EVENTS], spans[MAX_EVENTS], records[MAX_EVENTS], brackets[MAX_EVENTS];
} Figures;

/* Get call `call`'s inputs ready in `set`, L2 cold, the solution's stream waiting for them. */
static int ready_call(uint32_t tier, uint64_t call, uint32_t k, int set) {
    if (prepare_call(tier, call, k, set) < 0 || flush_l2(tier) < 0) return -1; /* inputs first: a cold L2 */
    if (tier == TIER_CUPTI) { /* the call starts on an idle GPU: its span includes its own launch gaps */
        CU(cu.ctxSynchronize(), "cuCtxSynchronize");
        return 0;
    }
    /* The event pair's start waits behind this lead on the GPU while run() launches: a launch that
     * outlasts it puts host time into the pair. One flush (~85 us on an H100) was outlasted by
     * Python launches of 30-95 us now and then, which moved their events figure 0.2-3x between
     * identical runs (results/proof/20261126-H100-events-rerun). */
    for (int i = 1; tier == TIER_EVENTS && i < EVENTS_LEAD_FLUSHES; i++)
        if (flush_l2(tier) < 0) return -1;
    if (hand_over() < 0) return -1;
    /* FlashInfer's events timer flushes on the stream it times, so its start event follows a
     * kernel there, not a wait on another stream: one more flush where the call runs. */
    return tier == TIER_EVENTS ? flush_l2_on(tier, 0) : 0;
}

/* Timed calls first .. first + count - 1 into `f`. Returns the calls completed: fewer than `count`
 * when run() raised (its exception left set, the calls before it timed and captured), -1 when
 * the core itself failed. */
static int timed(uint32_t tier, uint64_t first, uint32_t count, uint32_t warmup, Figures *f) {
    size_t per_call = capture_bytes_per_call();
    uint64_t lo[MAX_EVENTS], hi[MAX_EVENTS];
    if ((size_t)count * per_call > S.area_size) {
        PyErr_Format(PyExc_ValueError, "timing core: %u calls need %zu bytes of capture area, it has %zu",
                     count, (size_t)count * per_call, S.area_size);
        return -1;
    }
    if (tier == TIER_CUPTI) {
        if (C.missing[0]) { PyErr_Format(PyExc_RuntimeError, "timing core: %s", C.missing); return -1; }
        if (cupti_on() < 0) return -1;
    }
    for (uint32_t w = 0; w < warmup; w++) { /* untimed calls before the timed ones (the CUPTI tier's first chunk) */
        int set = (int)((first + w) % (uint64_t)S.n_sets);
        if (ready_call(tier, (1ULL << 41) + first + w, 0, set) < 0 || call_run(set) < 0 || deliver(set) < 0) return -1;
        if (S.gpu) CU(cu.ctxSynchronize(), "cuCtxSynchronize");
    }
    if (tier == TIER_CUPTI) cupti_forget();
    uint32_t done = 0;
    for (uint32_t k = 0; k < count; k++) {
        uint64_t call = first + k;
        int set = (int)(call % (uint64_t)S.n_sets);
        if (tier == TIER_CUPTI && cupti_now(&lo[k]) < 0) return -1; /* the window opens before the inputs exist */
        if (ready_call(tier, call, k, set) < 0) return -1;
        if (S.gpu) CU(cu.eventRecord(S.start[k], 0), "cuEventRecord");
        double t0 = now_ns();
        if (call_run(set) < 0) break;
        double t1 = now_ns();
        done = k + 1;
        if (S.gpu) CU(cu.eventRecord(S.end[k], 0), "cuEventRecord");
        f->host_ns[k] = t1 - t0;
        if (!S.gpu) f->samples[k] = (t1 - t0) / 1e3;
        if (deliver(set) < 0 || capture(tier, call, S.area + k * per_call, set) < 0) return -1;
        if (tier == TIER_CUPTI) { /* ... and closes once the outputs are captured, the GPU idle again */
            CU(cu.ctxSynchronize(), "cuCtxSynchronize");
            if (cupti_now(&hi[k]) < 0) return -1;
        }
    }
    if (S.gpu) {
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace); /* run()'s exception, if any, survives the CUDA calls */
        int failed = cu_failed(cu.ctxSynchronize(), "cuCtxSynchronize");
        for (uint32_t k = 0; k < done && !failed; k++) {
            float ms;
            failed = cu_failed(cu.eventElapsedTime(&ms, S.start[k], S.end[k]), "cuEventElapsedTime");
            f->samples[k] = (double)ms * 1e3;
            if (tier == TIER_CUPTI) f->brackets[k] = (double)ms * 1e3;
        }
        if (!failed && tier == TIER_CUPTI && done)
            failed = cupti_attribute(done, lo, hi, f->samples, f->spans, f->records) < 0;
        if (failed) { Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(trace); return -1; }
        PyErr_Restore(type, value, trace);
    }
    return (int)done;
}

/* The text of the pending Python exception (cleared), or None. */
static PyObject *take_error(void) {
    if (!PyErr_Occurred()) Py_RETURN_NONE;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    PyObject *text = NULL, *traceback = PyImport_ImportModule("traceback");
    if (traceback) {
        PyObject *lines = PyObject_CallMethod(traceback, "format_exception", "OOO", type ? type : Py_None,
                                              value ? value : Py_None, trace ? trace : Py_None);
        if (lines) {
            PyObject *empty = PyUnicode_FromString("");
            text = empty ? PyUnicode_Join(empty, lines) : NULL;
            Py_XDECREF(empty);
            Py_DECREF(lines);
        }
        Py_DECREF(traceback);
    }
    Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(trace);
    if (!text) { PyErr_Clear(); text = PyUnicode_FromString("run() raised (its traceback could not be formatted)"); }
    return text;
}

/* run_chunk(command) -> (signed result bytes, None or the traceback of run() when it raised;
 * the result then holds the calls before it). Layout: harness/judge/core.py. */
static PyObject *run_chunk(PyObject *self, PyObject *args) {
    PyObject *command;
    if (!PyArg_ParseTuple(args, "S", &command)) return NULL;
    if (!S.armed || !S.loaded || !S.run) { PyErr_SetString(PyExc_RuntimeError, "timing core: no workload or no run"); return NULL; }
    Reader r;
    if (open_command(command, CMD_CHUNK, &r) < 0) return NULL;
    uint64_t seq = S.seq - 1;
    uint32_t tier = (uint32_t)take(&r, 4), mode = (uint32_t)take(&r, 4);
    uint64_t first = take(&r, 8);
    uint32_t count = (uint32_t)take(&r, 4), warmup = (uint32_t)take(&r, 4);
    uint64_t warm_ns = take(&r, 8);
    uint32_t max_calls = (uint32_t)take(&r, 4);
    if (r.bad || r.left || (tier != TIER_WALLCLOCK && tier != TIER_EVENTS && tier != TIER_CUPTI) || mode > MODE_TIMED || count > MAX_EVENTS || (tier != TIER_WALLCLOCK) != S.gpu) {
        PyErr_SetString(PyExc_ValueError, "timing core: malformed chunk command");
        return NULL;
    }
    if (tier != TIER_CUPTI) cupti_off(); /* the CUPTI tier's recording stays on through its chunks only */
    uint32_t calls = 0, stopped = 0;
    double wall_ns = 0;
    static Figures f;
    static uint64_t words[MAX_EVENTS][WORDS_PER_CALL];
    memset(&f, 0, sizeof f);
    size_t per_call = capture_bytes_per_call();
    if (mode == MODE_WARM) {
        if (warm(tier, warm_ns, max_calls, &calls, &wall_ns) < 0) return NULL;
        count = 0;
    } else {
        double began = now_ns();
        int done = timed(tier, first, count, warmup, &f);
        if (done < 0) return NULL;
        wall_ns = now_ns() - began;
        stopped = (uint32_t)done < count;
        calls = count = (uint32_t)done;
        for (uint32_t k = 0; k < count; k++) { /* a secret sample of what was captured, signed below */
            size_t n_words = per_call / 8;
            uint64_t s = seed_of(3, seq, k, 0, 0);
            for (int j = 0; j < WORDS_PER_CALL; j++) {
                size_t at = n_words ? (size_t)(mix64(s + (uint64_t)(j + 1) * 0x9E3779B97F4A7C15ULL) % n_words) : 0;
                words[k][j] = 0;
                if (n_words) memcpy(&words[k][j], S.area + k * per_call + at * 8, 8);
            }
        }
    }
    PyObject *error = take_error();
    size_t size = 4 + 8 + 4 + 4 + 8 + 4 + 4 + 4 + 8 + 8 + (size_t)count * (5 * 8 + 8 * WORDS_PER_CALL) + 32;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!out) { Py_DECREF(error); return NULL; }
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    uint32_t magic = MAGIC;
    uint64_t capture = per_call;
#define PUT(v) do { memcpy(p, &(v), sizeof(v)); p += sizeof(v); } while (0)
    PUT(magic); PUT(seq); PUT(tier); PUT(mode); PUT(first); PUT(count); PUT(calls); PUT(stopped); PUT(wall_ns); PUT(capture);
    for (uint32_t k = 0; k < count; k++) PUT(f.samples[k]);
    for (uint32_t k = 0; k < count; k++) PUT(f.host_ns[k]);
    for (uint32_t k = 0; k < count; k++) PUT(f.spans[k]);
    for (uint32_t k = 0; k < count; k++) PUT(f.records[k]);
    for (uint32_t k = 0; k < count; k++) PUT(f.brackets[k]);
    for (uint32_t k = 0; k < count; k++) { memcpy(p, words[k], 8 * WORDS_PER_CALL); p += 8 * WORDS_PER_CALL; }
#undef PUT
    hmac2(PyBytes_AS_STRING(out), size - 32, NULL, 0, p);
    return Py_BuildValue("(NN)", out, error);
}

/* ------------------------------------------------------------------ arm and load */

/* arm(key_fd, area_fd, area_size, device_index, flush_bytes, cupti_flush_bytes, cupti_path): device_index
 * < 0 for a CPU run; flush_bytes the flush buffer (every tier's but CUPTI's flush), cupti_flush_bytes (at
 * most flush_bytes) the CUPTI tier's; cupti_path: the libcupti to load when this process has none loaded
 * ("" for none). */
static PyObject *arm(PyObject *self, PyObject *args) {
    int key_fd, area_fd, device;
    Py_ssize_t area_size, flush_bytes, cupti_flush_bytes;
    const char *cupti_path;
    if (!PyArg_ParseTuple(args, "iininnz", &key_fd, &area_fd, &area_size, &device, &flush_bytes, &cupti_flush_bytes,
                          &cupti_path)) return NULL;
    if (flush_bytes < 0 || cupti_flush_bytes < 0 || cupti_flush_bytes > flush_bytes) {
        PyErr_SetString(PyExc_ValueError, "timing core: flush sizes must satisfy 0 <= cupti_flush_bytes <= flush_bytes");
        return NULL;
    }
    if (S.armed) { PyErr_SetString(PyExc_RuntimeError, "timing core: armed already"); return NULL; }
    size_t got = 0;
    while (got < sizeof g_key) {
        ssize_t n = read(key_fd, g_key + got, sizeof g_key - got);
        if (n <= 0) { PyErr_SetString(PyExc_RuntimeError, "timing core: the key pipe ended early"); return NULL; }
        got += (size_t)n;
    }
    close(key_fd);
    void *area = mmap(NULL, (size_t)area_size, PROT_READ | PROT_WRITE, MAP_SHARED, area_fd, 0);
    close(area_fd);
    if (area == MAP_FAILED) { PyErr_SetFromErrno(PyExc_OSError); return NULL; }
    S.area = area; S.area_size = (size_t)area_size;
    PyObject *torch_c = PyImport_ImportModule("torch._C");
    if (!torch_c) return NULL;
    S.from_dlpack = PyObject_GetAttrString(torch_c, "_from_dlpack"); /* a builtin: nothing to patch in it */
    Py_DECREF(torch_c);
    if (!S.from_dlpack) return NULL;
    S.gpu = device >= 0;
    S.device_index = device;
    if (S.gpu) {
        CUcontext ctx = NULL;
        if (load_driver() < 0) return NULL;
        if (cu_failed(cu.ctxGetCurrent(&ctx), "cuCtxGetCurrent")) return NULL;
        if (!ctx) { PyErr_SetString(PyExc_RuntimeError, "timing core: no current CUDA context (initialize torch.cuda first)"); return NULL; }
        if (cu_failed(cu.memHostRegister(S.area, S.area_size, 0), "cuMemHostRegister (capture area)")) return NULL;
        S.flush_bytes = (size_t)flush_bytes;
        S.cupti_flush_bytes = (size_t)cupti_flush_bytes;
        if (cu_failed(cu.memAlloc(&S.flush, S.flush_bytes), "cuMemAlloc (L2 flush)")) return NULL;
        for (int i = 0; i < MAX_EVENTS; i++)
            if (cu_failed(cu.eventCreate(&S.start[i], 0), "cuEventCreate") || cu_failed(cu.eventCreate(&S.end[i], 0), "cuEventCreate")) return NULL;
        if (cu_failed(cu.streamCreate(&S.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
            cu_failed(cu.eventCreate(&S.ready, 2), "cuEventCreate") || cu_failed(cu.eventCreate(&S.ran, 2), "cuEventCreate"))
            return NULL; /* 2: CU_EVENT_DISABLE_TIMING, events only to wait on */
        load_cupti(cupti_path);
    } else {
        snprintf(C.missing, sizeof C.missing, "a CPU run");
    }
    S.armed = 1;
    Py_RETURN_NONE;
}

/* load(run, hands_over): the solution's positional DPS entry (harness/judge/dps.py), once;
 * hands_over: it is a value-returning entry's, whose run returns its results' data pointers. */
static PyObject *load(PyObject *self, PyObject *args) {
    PyObject *fn;
    int hands_over = 0;
    if (!PyArg_ParseTuple(args, "O|p", &fn, &hands_over)) return NULL;
    if (S.run) { PyErr_SetString(PyExc_RuntimeError, "timing core: a run is loaded already"); return NULL; }
    if (!PyCallable_Check(fn)) { PyErr_SetString(PyExc_TypeError, "timing core: run is not callable"); return NULL; }
    Py_INCREF(fn);
    S.run = fn;
    S.hands_over = hands_over;
    Py_RETURN_NONE;
}

/* recording_off(): the CUPTI tier's recording ended and CUPTI detached (cupti_off; nothing if it is
 * not on). The worker calls it before a tier it runs itself (sync, contest): the recording otherwise
 * stays on until the core's next chunk, so `--tiers sync` (which brings cupti before it) would time
 * flashinfer-bench's loop with CUPTI recording every launch. */
static PyObject *recording_off(PyObject *self, PyObject *unused) {
    cupti_off();
    Py_RETURN_NONE;
}

/* cupti_missing() -> None, or why the CUPTI tier cannot record here. */
static PyObject *cupti_missing(PyObject *self, PyObject *unused) {
    if (!C.missing[0]) Py_RETURN_NONE;
    return PyUnicode_FromString(C.missing);
}

/* kernel_names() -> the names of the kernels the last CUPTI chunk counted (at most MAX_NAMES). */
static PyObject *kernel_names(PyObject *self, PyObject *unused) {
    PyObject *names = PyList_New(0);
    for (int i = 0; names && i < C.n_names; i++) {
        PyObject *name = PyUnicode_DecodeUTF8(C.names[i], (Py_ssize_t)strlen(C.names[i]), "replace");
        if (!name || PyList_Append(names, name) < 0) { Py_XDECREF(name); Py_CLEAR(names); break; }
        Py_DECREF(name);
    }
    return names;
}

static PyMethodDef methods[] = {
    {"arm", arm, METH_VARARGS, "arm(key_fd, area_fd, area_size, device_index, flush_bytes, cupti_flush_bytes, cupti_path)"},
    {"load", load, METH_VARARGS, "load(run, hands_over=False)"},
    {"set_workload", set_workload, METH_VARARGS, "set_workload(command, stored)"},
    {"run_chunk", run_chunk, METH_VARARGS, "run_chunk(command) -> signed result"},
    {"cupti_missing", cupti_missing, METH_NOARGS, "cupti_missing() -> None or why CUPTI cannot record here"},
    {"recording_off", recording_off, METH_NOARGS, "recording_off(): the CUPTI tier's recording ended, CUPTI detached"},
    {"kernel_names", kernel_names, METH_NOARGS, "kernel_names() -> the kernels the last CUPTI chunk counted"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gdn_core", "The judge's timing core (gdn_core.c).", -1, methods};

PyMODINIT_FUNC PyInit__gdn_core(void) { return PyModule_Create(&module); }
