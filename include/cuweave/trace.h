/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cuweave: timelines. A cw_trace collects spans, each on a track: the GPU's
 * own begin and end of work on a stream (one track per stream), and host
 * spans (one track per host thread); cw_trace_write exports them as Chrome
 * trace-event JSON, which Perfetto's UI (ui.perfetto.dev) and
 * chrome://tracing open, and tools/trace_plot.py renders as a PNG.
 * docs/tracing.md describes the format and the clocks.
 *
 * Opt in: nothing is recorded unless a trace is made and attached (to a
 * pipeline with cw_pipeline_set_trace) or marks are placed (cw_trace_begin,
 * cw_trace_host_begin). A pipeline without a trace pays one pointer test
 * per compute call.
 *
 * A pipeline's compute calls are timed on the GPU one of two ways
 * (cw_trace_settings.gpu_timing): CUPTI's activity records, where libcupti
 * can be opened and no other tool holds it (each kernel, copy and memset a
 * call launched, begin and end from the hardware, correlated to the call:
 * no event, no launch), or timing events. Spans by hand (cw_trace_begin)
 * always take timing events. cw_trace_info.gpu_timing and the file's
 * "otherData" say which path a trace took, and why not CUPTI.
 *
 * GPU timestamps are timing events (cuEventRecord) recorded on the stream:
 * no kernel runs, so a mark takes no SM and works on a partition of any
 * size. Each context's events are put on the host's clock by one
 * calibration, made when the trace first records on a stream of that
 * context: an event recorded on a private stream and waited for, its GPU
 * time lying between the host's readings before the record and after the
 * wait (best of five; cw_trace_info.calibration_error_ns is the half-width
 * of the best window). cuEventElapsedTime's float milliseconds add an error
 * of at most 2^-24 of the time since the calibration (0.6 us at 10 s).
 * CUPTI's records are on CUPTI's clock (CLOCK_REALTIME on Linux), put on
 * the host's by an offset read as the middle of the shortest of five
 * windows around cuptiGetTimestamp, when the trace is made and at each
 * write (half the window: calibration_error_ns).
 *
 * Threading: every call is thread-safe (one lock per trace, held briefly:
 * cw_trace_write takes it for two passes over the spans, never while it
 * waits for the GPU, sorts or writes the file).
 */
#ifndef CUWEAVE_TRACE_H
#define CUWEAVE_TRACE_H

#include "cuweave/common.h"
#include "cuweave/flow.h"
#include "cuweave/resident.h"
#include "cuweave/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cw_trace cw_trace;

/* How a traced pipeline's compute calls are timed on the GPU
 * (cw_trace_settings.gpu_timing, cw_trace_info.gpu_timing). */
typedef enum cw_trace_gpu_timing {
    /* CUPTI when it can be had, else timing events (settings only). */
    CW_TRACE_GPU_AUTO = 0,
    /* Two timing events per call on its stream (cw_pipeline_set_trace). */
    CW_TRACE_GPU_EVENTS = 1,
    /* CUPTI's activity records: each kernel, copy and memset a call
     * launched, from the hardware, correlated to the call. */
    CW_TRACE_GPU_CUPTI = 2
} cw_trace_gpu_timing;

typedef struct cw_trace_settings {
    /* Spans kept at most (0: 1048576); past it new spans are counted in
     * cw_trace_info.dropped and not kept. */
    uint32_t max_spans;
    /* A cw_trace_gpu_timing (default CW_TRACE_GPU_AUTO). AUTO takes CUPTI
     * when libcupti opens (the file CUWEAVE_LIBCUPTI names, else the search
     * docs/tracing.md describes) and no other CUPTI user holds it (Nsight
     * Systems, Nsight Compute, compute-sanitizer, PyTorch's profiler, or
     * another program's own subscriber), else timing events. CUPTI is
     * CUPTI or an error from cw_trace_create. One CUPTI subscription serves
     * every CUPTI trace of the process: held from the first one's creation
     * to the last one's destruction, which is also when the kernel, copy and
     * memset records are collected (for every launch in the process; those
     * of no traced call are dropped at once). */
    uint32_t gpu_timing;
    uint8_t reserved[56];
} cw_trace_settings;

typedef struct cw_trace_info {
    uint64_t spans;               /* spans kept (open ones included) */
    uint64_t dropped;             /* spans not kept: past max_spans, and CUPTI's records lost (its
                                     buffers full) or of launches past max_spans */
    int64_t calibration_error_ns; /* the largest of the contexts' and CUPTI's calibration errors (0: none yet) */
    uint32_t tracks;              /* streams and host threads seen */
    uint32_t contexts;            /* calibrations made: a context's events, a context's global timer, CUPTI's clock */
    /* Since 0.3: the path the trace's pipelines take (CW_TRACE_GPU_EVENTS
     * or CW_TRACE_GPU_CUPTI; never AUTO). */
    uint32_t gpu_timing;
    /* Since 0.3: AUTO fell back to events: the CUptiResult of the CUPTI call
     * that refused (39: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, another
     * tool holds CUPTI), or -1 when libcupti could not be opened; 0 otherwise. */
    int32_t cupti_result;
    /* Since 0.3: CUPTI's kernel, copy and memset records merged (spans). */
    uint64_t gpu_records;
    uint8_t reserved[16];
} cw_trace_info;

/*
 * Fills *s with the defaults: max_spans 0 (1048576), gpu_timing
 * CW_TRACE_GPU_AUTO. NULL is ignored.
 *
 * Returns: nothing.
 */
CW_API void cw_trace_settings_default(cw_trace_settings *s);

/*
 * Makes an empty trace. Its time axis starts now (ts 0 in the export).
 * settings may be NULL for the defaults. With gpu_timing AUTO or CUPTI the
 * first such trace of the process opens libcupti (once), subscribes to it
 * and enables its kernel, copy and memset records; the trace's creation
 * then calibrates CUPTI's clock. Destroy with cw_trace_destroy.
 *
 * Returns:
 *   CW_SUCCESS                 *out is the new trace (AUTO: on CUPTI or on
 *                              events, cw_trace_info.gpu_timing says which).
 *   CW_ERROR_INVALID_ARGUMENT  out is NULL; settings has nonzero reserved
 *                              bytes or a gpu_timing that is not a
 *                              cw_trace_gpu_timing.
 *   CW_ERROR_NOT_SUPPORTED     gpu_timing CUPTI: libcupti could not be
 *                              opened (detail: what was tried), or it failed
 *                              (detail: the call and its CUptiResult).
 *   CW_ERROR_NOT_PERMITTED     gpu_timing CUPTI: CUPTI refused the
 *                              subscription: another tool holds it
 *                              (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
 *                              or profiling needs privileges this process
 *                              lacks (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES).
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 */
CW_API cw_status cw_trace_create(cw_trace **out, const cw_trace_settings *settings);

/*
 * Destroys the trace and its events (what was not written is lost). A
 * pipeline the trace is attached to keeps it alive until the pipeline is
 * destroyed or given another trace. NULL and a pointer to NULL do nothing;
 * *t is set to NULL.
 *
 * Returns: nothing.
 */
CW_API void cw_trace_destroy(cw_trace **t);

/*
 * Names the track of stream s (up to 63 bytes kept); unnamed, a stream's
 * track is "stream <n>" (a pipeline names an operator's stream after the
 * operator).
 *
 * Returns:
 *   CW_SUCCESS                 the track is named.
 *   CW_ERROR_INVALID_ARGUMENT  t, s or name is NULL.
 *   CW_ERROR_INVALID_HANDLE    t or s is not live.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 */
CW_API cw_status cw_trace_name_stream(cw_trace *t, cw_stream *s, const char *name);

/*
 * Names the calling thread's host track (up to 63 bytes kept); unnamed,
 * it is "thread <tid>".
 *
 * Returns:
 *   CW_SUCCESS                 the track is named.
 *   CW_ERROR_INVALID_ARGUMENT  t or name is NULL.
 *   CW_ERROR_INVALID_HANDLE    t is not live.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 */
CW_API cw_status cw_trace_name_thread(cw_trace *t, const char *name);

/*
 * Begins a GPU span named `name` (up to 47 bytes kept) on s: a timing event
 * recorded on s now marks where the GPU reaches this point of the stream.
 * Spans on one stream nest: cw_trace_end ends the one begun last. The first
 * span on a stream of a context calibrates that context's clock (see
 * above; one event waited for five times). s must not be capturing.
 *
 * Returns:
 *   CW_SUCCESS                 the begin is recorded.
 *   CW_ERROR_INVALID_ARGUMENT  t, s or name is NULL.
 *   CW_ERROR_INVALID_HANDLE    t or s is not live.
 *   CW_ERROR_INVALID_STATE     s is capturing.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory (the span is counted dropped
 *                              when past max_spans instead: CW_SUCCESS).
 *   CW_ERROR_DEVICE_FAULT      the context's device faulted (sticky).
 *   CW_ERROR_DRIVER            the driver refused (detail: the call).
 */
CW_API cw_status cw_trace_begin(cw_trace *t, cw_stream *s, const char *name);

/*
 * Ends the GPU span on s begun last and not ended: a timing event recorded
 * on s now.
 *
 * Returns:
 *   CW_SUCCESS                 the end is recorded (or the span was dropped).
 *   CW_ERROR_INVALID_ARGUMENT  t or s is NULL.
 *   CW_ERROR_INVALID_HANDLE    t or s is not live.
 *   CW_ERROR_INVALID_STATE     no span is open on s.
 *   CW_ERROR_DEVICE_FAULT      the context's device faulted (sticky).
 *   CW_ERROR_DRIVER            the driver refused (detail: the call).
 */
CW_API cw_status cw_trace_end(cw_trace *t, cw_stream *s);

/*
 * Begins a host span named `name` on the calling thread's track, now (the
 * monotonic clock). Host spans on one thread nest like GPU spans.
 *
 * Returns:
 *   CW_SUCCESS                 the span is begun (or dropped past max_spans).
 *   CW_ERROR_INVALID_ARGUMENT  t or name is NULL.
 *   CW_ERROR_INVALID_HANDLE    t is not live.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 */
CW_API cw_status cw_trace_host_begin(cw_trace *t, const char *name);

/*
 * Ends the calling thread's host span begun last and not ended, now.
 *
 * Returns:
 *   CW_SUCCESS                 the span is ended.
 *   CW_ERROR_INVALID_ARGUMENT  t is NULL.
 *   CW_ERROR_INVALID_HANDLE    t is not live.
 *   CW_ERROR_INVALID_STATE     no host span is open on this thread.
 */
CW_API cw_status cw_trace_host_end(cw_trace *t);

/*
 * Attaches trace t to pipeline p (NULL detaches): from the next compute
 * call, each call is a host span on the executor thread that runs it (its
 * operator's name; a thread's track not named with cw_trace_name_thread is
 * "executor thread <tid>"), the wait for its inputs a host span "wait inputs", a
 * wait for the max_in_flight bound a host span "in-flight wait", and the
 * call's GPU work spans on GPU tracks (the track of the stream it asked
 * for named after the operator unless named already). On events
 * (gpu_timing EVENTS): a span named after the operator on its stream from
 * where the stream has waited for the producers of the input ports it
 * asked for (the call's last cw_io_receive_stream) to the end of the call;
 * a call that never asks for its stream has no GPU span. On CUPTI: a span
 * per kernel (its name), copy ("memcpy HtoD", ...) and memset the calling
 * thread launched during the call, on the track of the stream it ran on,
 * from CUPTI's begin and end, with the operator, the iteration and the
 * launch's correlation id in its "args", and around a call's spans on one
 * track a span named after the operator from the first one's begin to the
 * last one's end; a call that launched nothing has no GPU span. The
 * pipeline keeps t alive until it is destroyed or given another trace.
 * Not while the pipeline runs.
 *
 * Returns:
 *   CW_SUCCESS                 t is attached (or p detached).
 *   CW_ERROR_INVALID_ARGUMENT  p is NULL.
 *   CW_ERROR_INVALID_HANDLE    p or t (not NULL) is not live.
 *   CW_ERROR_INVALID_STATE     p is running.
 */
CW_API cw_status cw_pipeline_set_trace(cw_pipeline *p, cw_trace *t);

/*
 * Adds to t the stages of resident loop r that began and ended since t
 * last read them: r must trace its stages (cw_resident_settings.trace),
 * whose marks hold the GPU's global timer at each stage's last begin and
 * end (the workload, the data-ready handler, the stages its capture
 * functions began, a resident pipeline's operators). Each stage is a span
 * on a GPU track "loop <n>: <stage>" (n: the loops of this trace, from 0,
 * in the order first recorded), and each copy of the iteration an
 * "iteration" span on "loop <n>: iterations" from its first stage's begin
 * to its last stage's end. The marks hold one iteration (the last one each
 * stage ran in): call this after each request's result (cw_resident_wait_result),
 * while the loop waits for the next one; stages that ran again since then
 * were overwritten, and an iteration still running (a copy of it with a
 * stage begun and not ended, such as a workload whose inner stages have
 * ended) is left whole for the next call, which adds each of its stages
 * once. Records into one trace run one at a time (a call on another
 * thread waits, after the calibration, until this one has noted what it
 * added), so threads recording the same loop at once add each stage once.
 * The first call for a context calibrates its global timer
 * against the host's clock: a one-thread kernel (cwk_timestamp) writing
 * the timer to mapped memory while the host spins on it, best of five; the
 * half-width of the window is the error (cw_trace_info). A loop that fills
 * every SM keeps that kernel from running: record once before launching it.
 *
 * Returns:
 *   CW_SUCCESS                 the new stages are added (perhaps none).
 *   CW_ERROR_INVALID_ARGUMENT  t or r is NULL.
 *   CW_ERROR_INVALID_HANDLE    t or r is not live.
 *   CW_ERROR_INVALID_STATE     r does not trace; r has no traced stages yet
 *                              (neither built nor launched).
 *   CW_ERROR_TIMEOUT           the calibration kernel did not run within
 *                              200 ms.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DEVICE_FAULT      the context's device faulted (sticky).
 *   CW_ERROR_DRIVER            the driver refused (detail: the call).
 */
CW_API cw_status cw_trace_record_resident(cw_trace *t, cw_resident *r);

/*
 * What the trace holds (no driver call).
 *
 * Returns:
 *   CW_SUCCESS                 *info is filled.
 *   CW_ERROR_INVALID_ARGUMENT  t or info is NULL.
 *   CW_ERROR_INVALID_HANDLE    t is not live.
 */
CW_API cw_status cw_trace_get_info(const cw_trace *t, cw_trace_info *info);

/*
 * Writes the trace to `path` as Chrome trace-event JSON:
 * {"traceEvents":[...],"displayTimeUnit":"ns"}, one "X" (complete) event
 * per ended span with ts and dur in microseconds from the trace's creation
 * (or from the earliest span, when one began before it),
 * pid 1 for host threads and pid 2 for GPU streams, one tid per track, and
 * "M" events naming the processes and tracks, and "otherData": how the
 * trace timed its compute calls ("gpu_timing": "events" or "cupti", and
 * "cupti": what was used, or why not). Waits for the GPU work of every GPU
 * span by hand ended before the call; spans still open are left out (and
 * kept). On CUPTI, first flushes CUPTI's records: the kernels, copies and
 * memsets that have completed are in the file; work still running on the
 * GPU is in a later write's (synchronize the pipeline first to have all). Other threads' calls on t go on while the write waits, sorts
 * (n log n) and writes; writes of one trace run one at a time. A span
 * ended before the call is in the file; one ended while the write runs is
 * in this file or in the next write's, never lost, never twice in a file.
 * May be called again: each file holds every span ended before its call.
 *
 * Returns:
 *   CW_SUCCESS                 the file is written.
 *   CW_ERROR_INVALID_ARGUMENT  t or path is NULL; the file could not be
 *                              written (detail: the path and errno's text).
 *   CW_ERROR_INVALID_HANDLE    t is not live.
 *   CW_ERROR_OUT_OF_MEMORY     no host memory.
 *   CW_ERROR_DEVICE_FAULT      a traced stream's work faulted.
 *   CW_ERROR_DRIVER            the driver refused (detail: the call).
 */
CW_API cw_status cw_trace_write(cw_trace *t, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* CUWEAVE_TRACE_H */
