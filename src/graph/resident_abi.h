/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave graph layer: the memory layout shared by the resident loop's host code
 * (src/graph/resident_*.cpp) and its kernels (ptx/cuweave_kernels.cu). Plain C so
 * that both compilers read the same definition.
 */
#ifndef CUWEAVE_RESIDENT_ABI_H
#define CUWEAVE_RESIDENT_ABI_H

#include "../../include/cuweave/resident_device.h"

#define CW_RES_RING 4096u /* per-iteration times kept for the median */

/* Exit reasons (cw_resident_exit). */
#define CW_RES_EXIT_TEAR_DOWN 1u
#define CW_RES_EXIT_TIMEOUT 2u

/* Poll flags (kernel argument). */
#define CW_RES_ADAPTIVE 0x1u /* spin after each request, then back off */
#define CW_RES_HANDLER 0x2u  /* requests come from the data-ready handler */
#define CW_RES_SYNC_HOST 0x4u
#define CW_RES_GATE_KERNELS 0x8u /* no IF node: the workload's kernels check pub.skip */

/* Pinned, mapped host memory (one page): the doorbell and the results. */
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

/* Device memory: the public block first, then what the loop keeps. */
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
    unsigned long long pad2[2];
    unsigned int ring[CW_RES_RING]; /* iteration times, ns (saturated at 2^32-1) */
} cw_res_dev;

/* Trace (cw_resident_settings.trace): each stage has two words in mapped
 * host memory, marks[2 * i] when it began and marks[2 * i + 1] when it
 * ended, both values of d->trace_clock (the global timer's ns, made
 * unique); a stage that began after it last ended was running when the loop
 * faulted. */
#define CW_RES_MAX_STAGES 1024u

#endif /* CUWEAVE_RESIDENT_ABI_H */
