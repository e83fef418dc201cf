/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: device-side functions for kernels of a GPU-resident loop (the
 * workload and the data-ready handler of a cw_resident). For nvcc and for
 * NVRTC: it includes nothing. With NVRTC, either add -I<prefix>/include or
 * pass cw_builtin_get_resident_header() as an in-memory header of this name.
 *
 * Kernels receive the loop's device block as a kernel argument (its address
 * comes from cw_resident_get_ctl) and call:
 *
 *   cw_resident_skip(ctl)              nonzero: this iteration serves nothing; return at
 *                                      once (required of every workload kernel when the
 *                                      loop gates by kernels, CW_RESIDENT_GATE_KERNELS);
 *                                      waits as cw_resident_wait does first; in a
 *                                      data-ready handler: 0, nonzero only when the loop
 *                                      stops this iteration
 *   cw_resident_wait()                 waits until the work before this kernel in the
 *                                      iteration has finished and its writes are visible
 *                                      (needed with the overlap setting, where a kernel may
 *                                      start before the one before it ends; free otherwise)
 *   cw_resident_sequence(ctl)          the request being served (1, 2, ...);
 *                                      in a data-ready handler: the last one served
 *   cw_resident_input(ctl)             the input slot of the request being served
 *   cw_resident_mark_data_ready(ctl)   (data-ready handler) serve a request this iteration
 *   cw_resident_mark_data_not_ready(ctl)  (data-ready handler) take that back
 *
 * Stages of a fused dataflow loop (CW_FUSED_DATAFLOW) get a cw_fused_tile
 * instead of the device block: its request, input slot, tile and shared
 * memory; cw_fused_tile_sync(t) synchronises the threads of a tile.
 *
 * The block is shared by all threads: call the marking functions from one
 * thread (or accept that the last write wins; both write constants).
 *
 * With gate CW_RESIDENT_GATE_BEGIN_END the loop has no poll and no signal kernel
 * of its own: the workload's first kernel takes the request and its last
 * kernel reports it, so that a request is the workload's kernels and
 * nothing else:
 *
 *   cw_resident_begin(ctl)             (first kernel, every thread of every block, before
 *                                      anything else) waits for the next request as the
 *                                      loop's poll does (doorbell, stop, timeout, the idle
 *                                      sleep): nonzero when the loop stops instead (return
 *                                      at once); 0: a request was taken (its number is
 *                                      cw_resident_sequence). One thread of block 0 polls;
 *                                      the other blocks wait for its decision.
 *   cw_resident_end(ctl)               (last kernel, every thread of every block, after its
 *                                      writes) the last block to get there records the
 *                                      iteration's time and writes the result signal (with
 *                                      a system-wide fence under sync_with_host). Does
 *                                      nothing in an iteration that serves nothing.
 *
 * Kernels between the first and the last start with cw_resident_skip(ctl)
 * as in a loop gated by kernels; a workload of one kernel calls both begin
 * and end. Both contain __syncthreads(): call them where every thread of
 * the block gets. The other blocks of the first kernel wait (spinning, with
 * short sleeps) until block (0,0,0) has decided: the hardware starts block
 * 0 first, which is what they rely on, as cub's decoupled look-back does.
 *
 * The rest of the block after cw_resident_ctl (cw_res_dev) and the host
 * block (cw_res_host) are the library's: their layout is that of the
 * library this header comes with (cw_builtin_get_resident_header gives
 * NVRTC programs the matching text); only begin and end read them.
 */
#ifndef CUWEAVE_RESIDENT_DEVICE_H
#define CUWEAVE_RESIDENT_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The part of the loop's device block that kernels use. The library keeps
 * more after it; only these fields are an interface. */
typedef struct cw_resident_ctl {
    unsigned long long seq;         /* the request being served */
    unsigned long long input;       /* device address of input slot 0 (0: no input slots) */
    unsigned long long input_bytes; /* bytes per input slot */
    unsigned int input_slots;       /* 0, 1 or 2 */
    unsigned int ready;             /* set by the data-ready handler this iteration */
    unsigned int skip;              /* nonzero: this iteration serves no request */
    unsigned int pad;
    unsigned long long reserved[3];
} cw_resident_ctl;

/* What a tile of a fused dataflow stage (CW_FUSED_DATAFLOW) is given: its
 * stage's function is called as NAME(const cw_fused_tile *t, void *user) by
 * the block's threads with threadIdx.x < t->threads. The descriptor lives
 * in shared memory; it is valid during the call. */
typedef struct cw_fused_tile {
    unsigned long long seq;   /* the request (1, 2, ...: cw_resident_data_ready's numbers) */
    void *input;              /* the request's input slot (NULL without input slots) */
    void *shared;             /* the stage's dynamic shared memory (its shared_bytes) */
    unsigned int stage;       /* the stage (its index in stage_defs) */
    unsigned int tile;        /* this tile, 0 .. tiles - 1: tile = y * tiles_x + x */
    unsigned int tiles;
    unsigned int x, y;        /* the tile's coordinates */
    unsigned int tiles_x, tiles_y;
    /* The elements of the tile: x0 .. x0 + w - 1, y0 .. y0 + h - 1 of the
     * stage's size (a stage given as `tiles`: x0 = tile, w = h = 1). */
    unsigned int x0, y0, w, h;
    unsigned int slot;        /* (seq - 1) % in_flight: index per-request data by it */
    unsigned int threads;     /* threads working on the tile */
    unsigned int first;       /* 1: the first request of this launch (no previous one in it) */
    unsigned long long reserved[2];
} cw_fused_tile;

#define CW_RES_RING 4096u /* per-iteration times kept for the median */

/* Exit reasons (cw_res_dev.reason, cw_res_host.exit_reason). */
#define CW_RES_EXIT_TEAR_DOWN 1u
#define CW_RES_EXIT_TIMEOUT 2u
#define CW_RES_EXIT_STALLED 3u /* a fused dataflow loop's watchdog */

/* Poll flags (a kernel argument; kept in cw_res_dev.flags for begin and end). */
#define CW_RES_ADAPTIVE 0x1u /* spin after each request, then back off */
#define CW_RES_HANDLER 0x2u  /* requests come from the data-ready handler */
#define CW_RES_SYNC_HOST 0x4u
#define CW_RES_GATE_KERNELS 0x8u /* no IF node: the workload's kernels check pub.skip */

/* The library's: pinned, mapped host memory (one page): the doorbell and
 * the results. */
typedef struct cw_res_host {
    /* Written by the host, read by the GPU (one 16-byte load). */
    unsigned long long requested; /* the doorbell: requests made */
    unsigned int stop;            /* nonzero: stop at the next check */
    unsigned int epoch;           /* the launch this memory is set up for */
    unsigned long long base;      /* requests finished before this launch */
    unsigned char pad0[40];
    /* Written by the GPU, read by the host. */
    unsigned long long completed; /* number of the last finished request */
    unsigned int running_epoch;   /* the launch whose loop has started */
    unsigned int exited_epoch;    /* the launch whose loop has stopped */
    unsigned int exit_reason;     /* CW_RES_EXIT_* of exited_epoch */
    unsigned int pad1;
    unsigned long long run_ns;    /* GPU time from start to stop of exited_epoch */
    unsigned char pad2[32];
} cw_res_host;

/* The library's: the whole device block, the public part first. */
typedef struct cw_res_dev {
    cw_resident_ctl pub;          /* 64 bytes */
    unsigned long long started;   /* requests taken (seq of the last one taken) */
    unsigned long long t0;        /* globaltimer at the start of this launch */
    unsigned long long t_start;   /* globaltimer when the current request was taken */
    unsigned long long last_done; /* globaltimer at the last result signal */
    unsigned long long idle_polls;
    unsigned long long served;    /* iterations that ran the workload, all launches */
    unsigned long long min_ns, max_ns;
    unsigned int stopped;         /* this launch is stopping */
    unsigned int reason;
    unsigned int epoch;
    unsigned int backoff_ns;      /* adaptive: the current sleep between checks */
    unsigned int idle;            /* handler mode: the last iteration found nothing */
    unsigned int pad[3];
    unsigned long long trace_clock; /* trace: the last stage mark's value, global timer ns (cwk_res_mark) */
    /* Set by the arm kernel for cw_resident_begin and cw_resident_end. */
    unsigned long long host;        /* device address of the cw_res_host */
    unsigned long long timeout_ns;
    unsigned int sleep_ns, spin_ns, flags;
    unsigned int decided;           /* fused: block 0 of the first kernel took this iteration's decision */
    unsigned int ended;             /* fused: blocks of the last kernel that have ended */
    unsigned int pad3[3];
    unsigned int ring[CW_RES_RING]; /* iteration times, ns (saturated at 2^32-1) */
} cw_res_dev;

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

static __device__ __forceinline__ unsigned long long cw_resident_sequence(const cw_resident_ctl *ctl) {
    return *(const volatile unsigned long long *)&ctl->seq;
}

static __device__ __forceinline__ void cw_resident_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* Programmatic dependent launch: waits for the grids this one depends
     * on (nothing to wait for when it was launched the ordinary way). */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ unsigned int cw_resident_skip(const cw_resident_ctl *ctl) {
    cw_resident_wait();
    return *(const volatile unsigned int *)&ctl->skip;
}

/* Synchronises the threads working on a dataflow tile (t->threads of
 * them): __syncthreads when they are the whole block, __syncwarp when they
 * are one warp, else a named barrier (the block's other threads are not
 * there). */
static __device__ __forceinline__ void cw_fused_tile_sync(const cw_fused_tile *t) {
    if (t->threads == blockDim.x) __syncthreads();
    else if (t->threads == 32u) __syncwarp();
    else asm volatile("bar.sync 1, %0;" ::"r"(t->threads) : "memory");
}

static __device__ __forceinline__ void *cw_resident_input(const cw_resident_ctl *ctl) {
    const unsigned long long seq = cw_resident_sequence(ctl);
    const unsigned int slots = ctl->input_slots;
    if (slots == 0u || seq == 0ull) return (void *)0;
    return (void *)(ctl->input + ((seq - 1ull) % slots) * ctl->input_bytes);
}

static __device__ __forceinline__ void cw_resident_mark_data_ready(cw_resident_ctl *ctl) {
    *(volatile unsigned int *)&ctl->ready = 1u;
}

static __device__ __forceinline__ void cw_resident_mark_data_not_ready(cw_resident_ctl *ctl) {
    *(volatile unsigned int *)&ctl->ready = 0u;
}

/* ---- the loop's poll and signal (the library's kernels use them too) ---- */

static __device__ __forceinline__ unsigned long long cw__res_now(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ void cw__res_nap(unsigned ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(ns);
#else
    (void)ns;
#endif
}

/* Sleeps about ns nanoseconds (__nanosleep sleeps at most about 1 ms and
 * may wake early: the global timer decides). */
static __device__ void cw__res_sleep(unsigned long long ns) {
    const unsigned long long end = cw__res_now() + ns;
    for (;;) {
        const unsigned long long now = cw__res_now();
        if (now >= end) return;
        const unsigned long long left = end - now;
        cw__res_nap(left > 1000000ull ? 1000000u : (unsigned)left);
    }
}

/* What an idle check is followed by: nothing (spin), a fixed sleep, or the
 * adaptive policy (no sleep within spin_ns of the last result, then 1 us,
 * 2 us, 4 us, ... up to sleep_ns). */
static __device__ void cw__res_pause(cw_res_dev *d, unsigned long long now, unsigned sleep_ns, unsigned spin_ns,
                                     unsigned flags) {
    if (sleep_ns == 0u) return;
    if (!(flags & CW_RES_ADAPTIVE)) {
        cw__res_sleep(sleep_ns);
        return;
    }
    if (now - d->last_done < (unsigned long long)spin_ns) return;
    unsigned b = d->backoff_ns;
    b = b == 0u ? 1000u : b * 2u;
    if (b > sleep_ns) b = sleep_ns;
    d->backoff_ns = b;
    cw__res_sleep(b);
}

/* The poll (one thread): 0 the loop stops (or has stopped) this iteration,
 * pub.skip set; 1 a request was taken, pub.skip clear; 2 (data-ready
 * handler) the handler runs next, pub.skip and pub.ready clear. Host
 * requests: waits (spinning or sleeping as set) until the doorbell is ahead
 * of the requests taken and takes one, or stops on the stop word or the
 * timeout. With a handler: checks stop and timeout, sleeps when the last
 * iteration found nothing. */
static __device__ unsigned cw__res_poll(const cw_res_host *h, cw_res_dev *d, unsigned long long timeout_ns,
                                        unsigned sleep_ns, unsigned spin_ns, unsigned flags) {
    if (d->stopped) {
        d->pub.skip = 1u;
        return 0u;
    }
    const unsigned long long started = d->started;
    for (int first = 1;; first = 0) {
        /* the doorbell and the stop word in one 16-byte load */
        unsigned long long requested, word;
        asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(requested), "=l"(word) : "l"(h) : "memory");
        const unsigned stop = (unsigned)(word & 0xffffffffull);
        const unsigned long long now = cw__res_now();
        if (stop || (timeout_ns != 0ull && now - d->t0 >= timeout_ns)) {
            d->stopped = 1u;
            d->reason = stop ? CW_RES_EXIT_TEAR_DOWN : CW_RES_EXIT_TIMEOUT;
            d->pub.skip = 1u;
            return 0u;
        }
        if (flags & CW_RES_HANDLER) {
            if (first && d->idle) {
                cw__res_pause(d, now, sleep_ns, spin_ns, flags);
                continue; /* check stop and timeout again after the sleep */
            }
            d->pub.ready = 0u;
            d->pub.skip = 0u;
            return 2u;
        }
        if (requested > started) {
            d->started = started + 1ull;
            d->pub.seq = started + 1ull;
            d->t_start = now;
            d->backoff_ns = 0u;
            d->pub.skip = 0u;
            return 1u;
        }
        d->idle_polls += 1ull;
        cw__res_pause(d, now, sleep_ns, spin_ns, flags);
    }
}

/* The result signal (one thread, in a served iteration): records the
 * iteration's time and writes the request's number where the host reads it
 * (after a system-wide fence with sync_with_host). */
static __device__ void cw__res_signal(cw_res_host *h, cw_res_dev *d, unsigned flags) {
    const unsigned long long now = cw__res_now();
    const unsigned long long dur = now - d->t_start;
    const unsigned long long served = d->served;
    d->ring[served % CW_RES_RING] = dur > 0xffffffffull ? 0xffffffffu : (unsigned)dur;
    if (served == 0ull || dur < d->min_ns) d->min_ns = dur;
    if (dur > d->max_ns) d->max_ns = dur;
    d->served = served + 1ull;
    d->last_done = now;
    if (flags & CW_RES_SYNC_HOST) __threadfence_system();
    *(volatile unsigned long long *)&h->completed = d->pub.seq;
}

/* The start of a launch (one thread, before the first poll): the launch's
 * numbers begin after the requests finished before it (h->base), and the
 * launch is announced to the host (running_epoch) after everything else. */
static __device__ void cw__res_arm(cw_res_host *h, cw_res_dev *d) {
    const unsigned long long now = cw__res_now();
    const unsigned long long base = *(volatile unsigned long long *)&h->base;
    d->t0 = now;
    d->last_done = now;
    d->stopped = 0u;
    d->reason = 0u;
    d->backoff_ns = 0u;
    d->idle = 0u;
    d->started = base;
    d->pub.seq = base;
    d->pub.ready = 0u;
    d->pub.skip = 1u;
    d->epoch = *(volatile unsigned *)&h->epoch;
    __threadfence_system();
    *(volatile unsigned *)&h->running_epoch = d->epoch;
}

/* The end of a launch (one thread, after the loop): why and when it stopped,
 * then which launch stopped. */
static __device__ void cw__res_exit(cw_res_host *h, const cw_res_dev *d) {
    *(volatile unsigned *)&h->exit_reason = d->reason;
    *(volatile unsigned long long *)&h->run_ns = cw__res_now() - d->t0;
    __threadfence_system();
    *(volatile unsigned *)&h->exited_epoch = d->epoch;
}

/* ---- gate CW_RESIDENT_GATE_BEGIN_END: the workload's kernels poll and signal ---- */

static __device__ __forceinline__ unsigned cw_resident_begin(cw_resident_ctl *ctl) {
    cw_res_dev *d = (cw_res_dev *)ctl;
    __shared__ unsigned cw__res_skip;
    cw_resident_wait();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
            (void)cw__res_poll((const cw_res_host *)d->host, d, d->timeout_ns, d->sleep_ns, d->spin_ns, d->flags);
            __threadfence();
            *(volatile unsigned *)&d->decided = 1u;
        } else {
            while (*(volatile unsigned *)&d->decided == 0u) cw__res_nap(64u);
            __threadfence();
        }
        cw__res_skip = *(volatile unsigned *)&d->pub.skip;
    }
    __syncthreads();
    return cw__res_skip;
}

static __device__ __forceinline__ void cw_resident_end(cw_resident_ctl *ctl) {
    cw_res_dev *d = (cw_res_dev *)ctl;
    __syncthreads(); /* the block's writes are done */
    if (threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0) return;
    if (*(volatile unsigned *)&d->pub.skip) return; /* nothing served: the loop stops */
    const unsigned flags = d->flags;
    if (flags & CW_RES_SYNC_HOST) __threadfence_system();
    else __threadfence();
    const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(&d->ended, 1u) + 1u != blocks) return;
    /* the last block: every block's writes are done and fenced */
    __threadfence();
    *(volatile unsigned *)&d->ended = 0u;
    *(volatile unsigned *)&d->decided = 0u; /* for the next iteration's begin */
    cw__res_signal((cw_res_host *)d->host, d, flags);
}

#endif /* __CUDACC__ || __CUDACC_RTC__ */

#endif /* CUWEAVE_RESIDENT_DEVICE_H */
