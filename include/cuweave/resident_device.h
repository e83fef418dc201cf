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
 * The block is shared by all threads: call the marking functions from one
 * thread (or accept that the last write wins; both write constants).
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

#endif /* __CUDACC__ || __CUDACC_RTC__ */

#endif /* CUWEAVE_RESIDENT_DEVICE_H */
