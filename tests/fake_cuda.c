/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A fake CUDA driver for CPU tests of cuweave's stream, pool and future
 * layer on machines without a GPU (CI has none).
 *
 * Build:  cc -shared -fPIC -std=c11 -Wall -Wextra -o libfakecuda.so tests/fake_cuda.c -lpthread
 * Use:    CUWEAVE_LIBCUDA=/path/to/libfakecuda.so (read by cuweave at its first init).
 *
 * It exports cuGetProcAddress_v2, which hands out a function for every entry
 * of CW_DRIVER_REQUIRED and CW_DRIVER_OPTIONAL in src/driver/driver.hpp (with the
 * signatures declared there) and reports every other symbol (the feature
 * probes included) as not found, except the entries of the optional features
 * below, which are "not found" too unless their feature is turned on.
 *
 * Optional features, all off by default: FAKE_CUDA_FEATURES is a
 * comma-separated list, read once, at the first cuGetProcAddress_v2 (or
 * fake_cuda_features) call; "all" turns every feature on. With a feature off
 * its entries are reported as not found, so the probes see an older driver.
 *  - "library": cuLibraryLoadData (options ignored; the image is checked
 *    the way the real driver tells images apart, as when it loads eagerly:
 *    a cubin is 64-bit little-endian ELF for EM_CUDA (190), a fatbin starts
 *    with the magic 0xBA55ED50 and version 1 (or is nvcc's wrapper of one,
 *    magic 0x466243B1), PTX is text whose first directive after blanks and
 *    comments is .version; the fake NVRTC's "FAKECUBIN" and "//FAKEPTX"
 *    code stands for a cubin and PTX; anything else is refused with
 *    CUDA_ERROR_INVALID_IMAGE), cuLibraryUnload, cuLibraryGetKernel (any
 *    name; the same name gives the same kernel again),
 *    cuKernelGetFunction (needs a current context), cuKernelGetParamInfo
 *    (a kernel whose name ends in "#" and parameter sizes separated by
 *    commas, "fill#8,4,8", has those parameters, laid out as a compiler
 *    would (each at an offset aligned to its size, at most 8); any other
 *    kernel has none: CUDA_ERROR_INVALID_VALUE for every index, as past the
 *    last one), cuFuncGetParamInfo (the same, for the kernel's function),
 *    cuFuncGetName (the kernel's name) and cuLaunchKernelEx. A captured
 *    kernel node keeps the function and a copy of its arguments (up to 16,
 *    as the name lays them out): cuGraphKernelNodeGetParams gives them back
 *    (always present, as cuGraphChildGraphNodeGetGraph, whose clone
 *    cuGraphGetNodes accepts, cuGraphAddKernelNode, which makes such a node
 *    by hand, and cuGraphKernelNodeCopyAttributes, a no-op). A launch (cuLaunchKernelEx or cuLaunchKernel, of a
 *    kernel's function or of a CUkernel cast to CUfunction) is a work item
 *    that does nothing, in stream order; during a capture it is recorded as
 *    a kernel node, replayed (as a no-op item) by graph launches. A launch
 *    of any other function still fails with CUDA_ERROR_NOT_SUPPORTED (the
 *    fake cannot load modules);
 *  - "conditional": cuGraphConditionalHandleCreate (distinct nonzero
 *    handles, owned by the graph they were made on) and cuGraphAddNode for
 *    CU_GRAPH_NODE_TYPE_CONDITIONAL only (any other type:
 *    CUDA_ERROR_NOT_SUPPORTED). As the real driver (checked against the
 *    580 driver): the handle must have been made on the very graph the node
 *    goes into (else CUDA_ERROR_INVALID_VALUE), params->conditional.ctx must
 *    be non-NULL (else CUDA_ERROR_INVALID_CONTEXT), IF takes 1 or 2 bodies,
 *    WHILE 1; the node's body graphs are made empty and
 *    params->conditional.phGraph_out is set to the node's own array of
 *    them. Bodies are owned by their node: cuGraphDestroy of a body is
 *    refused (CUDA_ERROR_INVALID_VALUE), destroying the top-level graph
 *    frees them (and nested conditionals' bodies). Bodies can be captured
 *    into (cuStreamBeginCaptureToGraph), given empty, child graph and
 *    conditional nodes, and queried like any graph. A child graph that
 *    holds a conditional node is refused (CUDA_ERROR_NOT_SUPPORTED, as the
 *    real driver). A conditional node does nothing when its graph is
 *    launched: bodies never run. cuGraphExecUpdate succeeds when the
 *    conditional nodes and their bodies have the same shape (else
 *    CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED); bodies' contents are not
 *    updated (they never run). Destroying a graph (or the top-level graph
 *    of a body) that a capture records into ends that capture.
 *    cuStreamBeginCaptureToGraph is always present.
 * Always present: cuOccupancyMaxActiveBlocksPerMultiprocessor (blocks of
 * a library kernel's function an SM holds: 2048 threads and 228 KiB of
 * shared memory an SM, at most 32 blocks; $FAKE_CUDA_OCCUPANCY, read at each
 * call, instead when set), cuFuncSetAttribute (only
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), and
 * CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH 1 (0 while $FAKE_CUDA_NO_COOPERATIVE
 * is set); cuLaunchKernelEx records the last launch's grid, block, dynamic
 * shared bytes and CU_LAUNCH_ATTRIBUTE_COOPERATIVE (fake_cuda_last_launch).
 * The new entries count in fake_cuda_calls like every other; a kernel launch
 * is a work item like the others (it can fault with fake_cuda_fault; it is
 * not counted by fake_cuda_discard, having no host-visible effect).
 * fake_cuda_features() returns the features on (bit 0 conditional, bit 1
 * library).
 *
 * The model:
 *  - FAKE_CUDA_DEVICES devices: 1 to 4, default 1, any other value means 1;
 *    read once, at the first cuInit. Ordinals 0..n-1, CUdevice = ordinal;
 *    each a "cuweave fake device" (cc 9.0, 132 SMs, PCI bus id 0x42 +
 *    ordinal, a uuid whose first byte differs per device). Every entry
 *    taking a CUdevice (cuDeviceGet's ordinal, cuDeviceGetDevResource and
 *    the peer entries' devices included) refuses any other value with
 *    CUDA_ERROR_INVALID_DEVICE; cuMemPoolCreate refuses a location id that
 *    is not a device with CUDA_ERROR_INVALID_VALUE;
 *  - each device's primary context, with its own retain count, flags and
 *    legacy stream, and a second, always-alive context of device 0 that
 *    tests can make current as "the host program's context"
 *    (fake_cuda_other_context). The contexts of device k: its primary (and
 *    that second context for k = 0). A thread-local current context, any
 *    live context of any device; cuCtxGetDevice reports the current
 *    context's device, cuStreamGetCtx / cuStreamGetDevice the stream's. The
 *    last release of a device's primary context destroys it: the streams
 *    and events still alive on it count as orphans (fake_cuda_live
 *    "orphans"), and its peer access (both ways) goes;
 *  - streams with flags and a priority clamped into [-5, 0]; the NULL stream,
 *    CU_STREAM_LEGACY and CU_STREAM_PER_THREAD mean the current context's
 *    legacy stream (CUDA_ERROR_INVALID_CONTEXT when none is current);
 *  - work (stream writes and waits, host functions, event records, async
 *    copies and memsets), of every device, goes into ONE global FIFO: that
 *    keeps per-stream order and makes every cross-stream event wait
 *    trivially satisfied, across devices too (cuStreamWaitEvent takes an
 *    event of any context, as the real driver). When
 *    the FIFO is empty and not held, a write, record, copy or memset runs at
 *    once, in the enqueueing call; host functions always run on the fake's
 *    callback thread (as the real driver's), in order;
 *  - fake_cuda_hold(1) stops completion; fake_cuda_hold(0) lets the callback
 *    thread complete everything queued, in order;
 *  - hazards (see hb_entry): the FIFO's order hides races a GPU would have,
 *    so the fake follows what orders streams (event records and
 *    cuStreamWaitEvent, transitively) and, per device allocation, the
 *    unfinished accesses of stream-ordered work (copies, memsets, value
 *    writes and waits, cuMemFreeAsync). An access on a stream not ordered
 *    after another stream's unfinished write (or, for a write or a free,
 *    any access) of the same allocation is a hazard: counted
 *    (fake_cuda_live("hazards"), which tests/fakelive.h's leak check
 *    compares) and the last one described (fake_cuda_hazards).
 *    fake_cuda_mem_busy(dptr) gives the unfinished accesses of the
 *    allocation holding dptr (a buffer a cache hands out must have none);
 *  - fake_cuda_fault(1): the next piece of work to complete faults instead:
 *    a sticky CUDA_ERROR_ILLEGAL_ADDRESS is reported by cuStreamQuery,
 *    cuStreamSynchronize, cuEventQuery, cuEventSynchronize, cuEventElapsedTime
 *    and cuCtxSynchronize, and no later work has any effect (writes are not
 *    written, host functions are not called: a faulted GPU stops). 
 *    fake_cuda_fault(0) disarms and clears the sticky error;
 *  - host memory (cuMemHostAlloc = calloc, device pointer = host address)
 *    and device memory (malloc; of whichever device, one address space) are
 *    tracked; one allocation larger than the device's memory (80 GiB), or
 *    than FAKE_CUDA_MEM_LIMIT bytes when that is set (read once, at the
 *    first allocation; the fuzzers set it), fails with
 *    CUDA_ERROR_OUT_OF_MEMORY without asking malloc; a stream write or copy to memory that is not (or no longer)
 *    allocated counts as a bad access and faults like a real GPU would
 *    (fake_cuda_live("badaccess"));
 *  - peer access (always present, no feature): two different devices can
 *    access each other unless FAKE_CUDA_NO_PEER is a nonzero integer (read
 *    once, at the first cuInit); a device never "accesses" itself.
 *    cuDeviceCanAccessPeer gives 1 or 0 accordingly (0 for dev == peer).
 *    cuDeviceGetP2PAttribute: PERFORMANCE_RANK 0, ACCESS_SUPPORTED and
 *    NATIVE_ATOMIC_SUPPORTED as can-access; any other attribute
 *    CUDA_ERROR_INVALID_VALUE, src == dst CUDA_ERROR_INVALID_DEVICE.
 *    cuCtxEnablePeerAccess(peer, flags) records the pair (current context,
 *    peer): no current context INVALID_CONTEXT, flags != 0 INVALID_VALUE,
 *    peer not a live context INVALID_CONTEXT, peer of the current device
 *    INVALID_DEVICE, topology says no PEER_ACCESS_UNSUPPORTED, pair already
 *    recorded PEER_ACCESS_ALREADY_ENABLED (fake_cuda_live("peers") counts
 *    the pairs). cuMemcpyPeerAsync: both contexts live (else
 *    INVALID_CONTEXT), both ranges inside tracked device (not host)
 *    allocations (else INVALID_VALUE); an async copy like the others, in
 *    stream order, whether or not peer access is on (the real driver
 *    stages through host memory then): a call is counted in "direct" when
 *    the two contexts are of one device or access is on between them (in
 *    either direction), else in "staged";
 *  - pools record their device (props->location.id). cuMemPoolSetAccess
 *    stores flags per (pool, device), all descriptors checked before any
 *    is applied: a live pool and a map (when count > 0) else INVALID_VALUE,
 *    location type DEVICE and flags PROT_NONE / READ / READWRITE else
 *    INVALID_VALUE, a bad device id, the pool's own device given less than
 *    READWRITE or a peer without topology access INVALID_DEVICE.
 *    cuMemPoolGetAccess gives them back (the own device READWRITE, the
 *    others PROT_NONE until set). Nothing enforces them.
 *
 *  - interprocess memory and events (always present, no feature), across
 *    real processes of one machine: cuMemAlloc's memory is a memfd mapped
 *    shared (so another process can map the same pages); cuIpcGetMemHandle
 *    of an allocation's start writes the exporter's pid and the memfd's
 *    number, and cuIpcOpenMemHandle in another process opens
 *    /proc/<pid>/fd/<n> and maps it (counted in "ipcmem" until
 *    cuIpcCloseMemHandle). An event made with CU_EVENT_INTERPROCESS (which
 *    needs CU_EVENT_DISABLE_TIMING) has a shared page of two counters: records
 *    enqueued and the last record completed; cuIpcOpenEventHandle maps that
 *    page into another process, where cuStreamWaitEvent waits (a value wait
 *    on the shared page, polled by the callback thread) for the records
 *    enqueued when it was called, in whichever process. Opening a handle in
 *    the process that made it is refused with CUDA_ERROR_INVALID_CONTEXT
 *    (as the real driver refuses it), a handle whose process or memfd is
 *    gone with CUDA_ERROR_INVALID_HANDLE, anything not made by
 *    cuIpcGet*Handle with CUDA_ERROR_INVALID_VALUE. FAKE_CUDA_NO_IPC set
 *    to a nonzero integer reports the cuIpc* entries as not found (a
 *    driver without CUDA IPC); cuMemGetAddressRange gives the start and
 *    size of the device allocation or imported mapping holding an address
 *    (CUDA_ERROR_NOT_FOUND for any other);
 *
 * Live counts (fake_cuda_live): see the comment there; "primary" is
 * device 0's primary retain count, "primary0" .. "primary3" each device's;
 * "peers", "staged" and "direct" count peer access and peer copies; "graph"
 * counts top-level graphs only, conditional bodies are counted in "body";
 * "library" and "kernel" count the library feature's objects.
 *
 * One mutex guards everything; host functions run without it held. Driver
 * calls made from inside a host function are counted
 * (fake_cuda_live("cbcalls")) and refused with CUDA_ERROR_NOT_PERMITTED
 * (CUDA forbids every CUDA call in a host function launched with
 * cuLaunchHostFunc, and says it may fail them so; blocking ones would
 * deadlock here), all but those that only touch the calling thread's state
 * or static text: cuCtxGetCurrent, cuCtxSetCurrent, cuGetErrorName and
 * cuGetErrorString (counted all the same).
 *
 * Persistent launches (the oracle of issue 38): a graph launch whose graph
 * has a WHILE conditional node at its top level (a resident loop's) and a
 * cooperative cuLaunchKernelEx of "cwf_resident_loop" or "cwf_dataflow_loop" (a fused loop's) mark
 * their stream as running persistent work, until a cuStreamQuery or
 * cuStreamSynchronize of that stream reports it idle (how cuweave learns
 * that a loop stopped) or the stream is destroyed. The real driver makes
 * some calls wait until no kernel runs on the device (docs/resident.md,
 * "What waits for a running loop"); one made while a mark is set on the
 * device of the calling thread's context (any device without one) waits
 * until that loop ends. So does the fake's, up to 2 s (a launch the library
 * ends itself, such as a resident loop's trial run at its build, is seen
 * idle by then); a mark still set then is a call that would wait for good
 * on the real driver: the fake counts it as a violation
 * (fake_cuda_persistent_violations) and carries on. The calls: cuMemFree,
 * cuMemFreeHost, cuModuleLoadData, cuModuleUnload, cuLibraryLoadData,
 * cuLibraryUnload, cuGraphExecDestroy of an exec with conditional nodes,
 * and cuCtxSynchronize of the marked stream's own context.
 * fake_cuda_persistent_running() counts the marked streams;
 * fake_cuda_persistent_watch(0) turns the marking off (a test that fails
 * driver calls before they reach the fake hides from it the queries that
 * would clear marks), fake_cuda_persistent_watch(1) on again.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/driver/cuda_min.h"

#define FAKE_API __attribute__((visibility("default")))

/* ---- state ------------------------------------------------------------- */

struct CUctx_st {
    uint32_t magic;
    int is_primary;
    struct CUstream_st *legacy;
    int dev;        /* the device ordinal */
    unsigned flags; /* CU_CTX_SCHED_* and the rest, as cuCtxGetFlags says (fake_cuda_set_context_flags) */
};

struct deps {
    struct CUgraphNode_st **v;
    size_t n, cap;
};

/* Happens-before tracking (see "Hazards" at fake_cuda_hazards). */
struct hb_clock;
struct hb_access;
static void hb_clock_free(struct hb_clock *c);

struct CUstream_st {
    uint32_t magic;
    CUcontext ctx;
    unsigned flags;
    int priority;
    int is_legacy;
    int destroyed;     /* destroyed by the user, freed when pending reaches 0 */
    long pending;      /* queued items not completed */
    long pins;         /* threads blocked in cuStreamSynchronize on it */
    struct CUstream_st *next_live;
    /* capture (zero for streams that never captured) */
    struct CUgraph_st *cap;        /* the graph this stream's work is recorded into */
    int cap_origin;                /* the capture was begun on this stream */
    int cap_own_graph;             /* begun by cuStreamBeginCapture: the graph is the capture's */
    int cap_mode;
    pthread_t cap_thread;
    struct deps cdeps;             /* what the next captured node depends on */
    long node_gen;                 /* nodes captured on this stream */
    int joined;                    /* its last node was waited for by another stream of the capture */
    /* happens-before tracking (hb_*): an id, and what its later work is ordered after */
    uint64_t hb_id;
    struct hb_clock *hb;
};

struct CUevent_st {
    uint32_t magic;
    CUcontext ctx;
    unsigned flags;
    int recorded;      /* a record was enqueued at least once */
    int destroyed;
    long pending;      /* records enqueued and not completed */
    long pins;         /* threads blocked in cuEventSynchronize on it */
    double time_ms;    /* when the last record completed */
    struct CUevent_st *next_live;
    /* recorded during a capture: the capture's dependencies at that point */
    struct CUgraph_st *cap_graph;
    struct CUstream_st *cap_stream;
    long cap_gen;
    struct deps cdeps;
    /* CU_EVENT_INTERPROCESS: the page shared with the processes that opened it */
    struct ipc_word *shared;
    int shared_fd;  /* the page's memfd (exporter), -1 in an importer */
    int imported;   /* opened with cuIpcOpenEventHandle */
    struct hb_clock *hb; /* what the last record stands for (hb_*) */
};

/* An interprocess event's shared page. */
struct ipc_word {
    uint32_t enqueued;  /* records enqueued, in every process */
    uint32_t done;      /* the number of the last record completed */
};

/* The contents of the fake's IPC handles (64 bytes). */
#define IPC_MAGIC_MEM 0x4d504946u   /* FIPM */
#define IPC_MAGIC_EVENT 0x45504946u /* FIPE */
struct ipc_handle {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    uint32_t pad;
    uint64_t bytes;
};

struct alloc {
    char *p;
    size_t bytes;
    int host;
    int fd;  /* cuMemAlloc's memfd (-1: malloc'd), or an imported mapping's -1 */
    int ipc; /* mapped by cuIpcOpenMemHandle */
    struct alloc *next;
    struct hb_access *acc; /* unfinished accesses by stream-ordered work (hb_*) */
    size_t nacc, cap_acc;
};

enum item_kind { IT_WRITE32, IT_WRITE64, IT_WAIT32, IT_HOSTFN, IT_RECORD, IT_COPY, IT_MEMSET32, IT_NOP, IT_KERNEL, IT_FREE };

struct item {
    enum item_kind kind;
    struct CUstream_st *stream;
    struct CUevent_st *event;
    CUdeviceptr addr;
    uint64_t value;
    unsigned flags;
    CUhostFn fn;
    void *user;
    void *dst;
    const void *src;
    size_t bytes;
    int dst_checked, src_checked; /* 1: the address must be a tracked allocation */
    int ipc;                      /* a wait on an interprocess event's shared page */
    /* IT_KERNEL: the launched function and a copy of its arguments (as the
     * kernel's name lays them out), for cuGraphKernelNodeGetParams */
    CUfunction func;
    unsigned nparams;
    unsigned short param_off[16];
    unsigned char args[256];
    uint64_t hb_seq; /* its number in the FIFO (hb_*; 0: not submitted) */
    /* the observer's (fake_cuda_observe) correlation id of the call that made
     * it (IT_KERNEL, IT_COPY, IT_MEMSET32 submitted, not captured; 0: none),
     * and a kernel's name */
    unsigned corr;
    char kname[48];
    struct item *next;
};

#define MAGIC_STREAM 0x53545246u
#define MAGIC_EVENT 0x45565446u
#define MAGIC_CTX 0x43545846u

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work_cv = PTHREAD_COND_INITIALIZER; /* callback thread: work arrived */
static pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER; /* waiters: work completed */

/* Devices: FAKE_MAX_DEVICES slots, the first g_ndev of them exist. */
#define FAKE_MAX_DEVICES 4
#define LEGACY_INIT_ {.magic = MAGIC_STREAM, .is_legacy = 1}
static struct CUstream_st g_legacy_primary[FAKE_MAX_DEVICES] = {LEGACY_INIT_, LEGACY_INIT_, LEGACY_INIT_, LEGACY_INIT_};
static struct CUstream_st g_legacy_other = LEGACY_INIT_;
#undef LEGACY_INIT_
static struct CUctx_st g_primary[FAKE_MAX_DEVICES] = {
    {MAGIC_CTX, 1, &g_legacy_primary[0], 0, 0},
    {MAGIC_CTX, 1, &g_legacy_primary[1], 1, 0},
    {MAGIC_CTX, 1, &g_legacy_primary[2], 2, 0},
    {MAGIC_CTX, 1, &g_legacy_primary[3], 3, 0},
};
static struct CUctx_st g_other = {MAGIC_CTX, 0, &g_legacy_other, 0, 0}; /* a context of device 0 */

static int g_initialized;
static int g_ndev = 1;       /* FAKE_CUDA_DEVICES, read at the first cuInit */
static int g_no_peer;        /* FAKE_CUDA_NO_PEER: no two devices can access each other */
static int g_devices_read;
static long g_primary_refs[FAKE_MAX_DEVICES];
static unsigned g_primary_flags[FAKE_MAX_DEVICES];
/* Peer access enabled from context a to context b (cuCtxEnablePeerAccess
 * with a current and b as the peer), by ctx_index. */
#define FAKE_NCTX (FAKE_MAX_DEVICES + 1)
static unsigned char g_peer[FAKE_NCTX][FAKE_NCTX];
static long g_peers, g_peer_staged, g_peer_direct;
/* initial-exec: static TLS even in a dlopen()ed library (glibc keeps room for
 * a little); dynamic TLS blocks of dlopen()ed libraries crash LeakSanitizer's
 * thread scan on some glibc/GCC combinations. */
#define FAKE_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static FAKE_TLS CUcontext t_current;
static FAKE_TLS int t_in_callback;

static struct CUstream_st *g_streams;
static struct CUevent_st *g_events;
static struct alloc *g_allocs;
static long g_live_streams, g_live_events, g_live_hostmem, g_live_devmem;
static long g_badaccess, g_cbcalls, g_orphans, g_live_ipcmem, g_sync_blocking;
static long g_sync_waiting; /* threads waiting in cuEventSynchronize now */
static long g_live_graphs, g_live_execs, g_live_bodies, g_live_libs, g_live_kernels, g_live_mempools;

static struct item *g_head, *g_tail;
static long g_queued;
static int g_hold;
static int g_fault_armed;
static CUresult g_sticky;
static long g_waits;
static int g_worker_started;
static int g_executing; /* the callback thread is working on the head item */
static pthread_t g_worker;

/* Per-entry call counters (fake_cuda_calls). */
#define FAKE_ENTRIES(X)                                                                          \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)    \
    X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                \
    X(cuDeviceGetUuid) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                  \
    X(cuDevicePrimaryCtxGetState) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxGetFlags)        \
    X(cuCtxSynchronize) X(cuCtxGetStreamPriorityRange) X(cuCtxGetApiVersion)                     \
    X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamWaitEvent) X(cuStreamSynchronize) \
    X(cuStreamQuery) X(cuStreamGetPriority) X(cuStreamGetFlags) X(cuStreamGetCtx)                \
    X(cuLaunchHostFunc) X(cuStreamWriteValue32) X(cuStreamWriteValue64) X(cuStreamWaitValue32)   \
    X(cuEventCreate) X(cuEventRecord) X(cuEventDestroy) X(cuEventSynchronize) X(cuEventQuery)    \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer) X(cuMemAlloc) X(cuMemFree)   \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                    \
    X(cuMemsetD32Async) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)             \
    X(cuLaunchKernel) X(cuEventElapsedTime) X(cuStreamGetDevice) X(cuStreamBeginCapture)          \
    X(cuStreamBeginCaptureToGraph) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuGraphCreate)  \
    X(cuGraphDestroy) X(cuGraphGetNodes) X(cuGraphNodeGetDependentNodes) X(cuGraphAddChildGraphNode) \
    X(cuGraphAddEmptyNode) X(cuGraphDebugDotPrint) X(cuGraphInstantiateWithFlags)                 \
    X(cuGraphExecDestroy) X(cuGraphUpload) X(cuGraphLaunch) X(cuGraphExecUpdate)                   \
    X(cuGraphConditionalHandleCreate) X(cuGraphAddNode) X(cuLibraryLoadData) X(cuLibraryUnload)  \
    X(cuLibraryGetKernel) X(cuKernelGetFunction) X(cuKernelGetParamInfo) X(cuFuncGetParamInfo) X(cuFuncGetName) X(cuLaunchKernelEx) X(cuGraphKernelNodeGetParams) X(cuGraphChildGraphNodeGetGraph) X(cuGraphAddKernelNode) X(cuGraphKernelNodeCopyAttributes) X(cuGraphKernelNodeSetAttribute) \
    X(cuFuncGetAttribute) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuFuncSetAttribute) X(cuGraphNodeGetType) X(cuGraphNodeGetDependencies) X(cuGraphAddDependencies) X(cuGraphRemoveDependencies) \
    X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolSetAttribute) X(cuMemPoolGetAttribute)             \
    X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync) X(cuDeviceCanAccessPeer) X(cuDeviceGetP2PAttribute)      \
    X(cuCtxEnablePeerAccess) X(cuMemcpyPeerAsync) X(cuMemPoolSetAccess) X(cuMemPoolGetAccess)     \
    X(cuDevSmResourceSplitByCount) X(cuDevResourceGenerateDesc) X(cuGreenCtxCreate) X(cuGreenCtxDestroy)   \
    X(cuCtxFromGreenCtx) X(cuGreenCtxGetDevResource) X(cuGreenCtxStreamCreate)                  \
    X(cuThreadExchangeStreamCaptureMode) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle)              \
    X(cuIpcCloseMemHandle) X(cuIpcGetEventHandle) X(cuIpcOpenEventHandle)                        \
    X(cuMemGetAddressRange)

enum {
#define FAKE_ID_(name) F_##name,
    FAKE_ENTRIES(FAKE_ID_)
#undef FAKE_ID_
    F_COUNT
};
static const char *const g_entry_names[F_COUNT] = {
#define FAKE_NAME_(name) #name,
    FAKE_ENTRIES(FAKE_NAME_)
#undef FAKE_NAME_
};
static long g_calls[F_COUNT];

static void lock(void) { pthread_mutex_lock(&g_mu); }
static void unlock(void) { pthread_mutex_unlock(&g_mu); }

/* ---- the activity observer (fake_cuda_observe; tests/fake_cupti.c) --------
 * api(entry, arg) runs at the start of cuLaunchKernel, cuLaunchKernelEx,
 * cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyPeerAsync, cuMemsetD32Async
 * and cuGraphLaunch, on the calling thread, before the fake's lock is taken;
 * the id it returns goes with the work the call submits (a graph launch's
 * kernels, copies and memsets each). done(activity, arg) runs when such
 * work completes (on the thread that completes it, the fake's lock held:
 * it must not call the fake), with the host's monotonic times around it. */
struct fake_cuda_activity {
    int kind;      /* 1 kernel, 2 copy, 3 memset */
    int copy_kind; /* a copy: 1 host to device, 2 device to host, 8 device to device */
    unsigned corr;
    CUcontext ctx;
    unsigned long long stream; /* the stream's id (fake_cuda_stream_id) */
    const char *name;          /* a kernel's */
    unsigned long long bytes;
    long long begin_ns, end_ns;
};
typedef unsigned (*fake_obs_api_fn)(const char *entry, void *arg);
typedef void (*fake_obs_done_fn)(const struct fake_cuda_activity *a, void *arg);
static fake_obs_api_fn g_obs_api;
static fake_obs_done_fn g_obs_done;
static void *g_obs_arg;
static _Thread_local __attribute__((tls_model("initial-exec"))) unsigned t_obs_corr;

static void obs_enter(const char *entry) {
    fake_obs_api_fn api = __atomic_load_n(&g_obs_api, __ATOMIC_ACQUIRE);
    t_obs_corr = api ? api(entry, __atomic_load_n(&g_obs_arg, __ATOMIC_ACQUIRE)) : 0u;
}

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Persistent launches (issue 38; defined with fake_cuda_persistent_violations). Lock held. */
static void pers_mark_locked(struct CUstream_st *s);
static void pers_clear_locked(const struct CUstream_st *s);
static void pers_check_locked(const char *entry, CUcontext only);

/* The entries a host function may call (see the top): the thread's current
 * context and the error texts. */
static int callback_may_call(int entry) {
    return entry == F_cuCtxGetCurrent || entry == F_cuCtxSetCurrent || entry == F_cuGetErrorName ||
           entry == F_cuGetErrorString;
}

/* Counts the call (under the lock: callers hold it); refuses one from a host
 * function (callback_may_call). */
#define ENTER(name)                                                   \
    do {                                                              \
        lock();                                                       \
        g_calls[F_##name]++;                                          \
        if (t_in_callback) {                                          \
            g_cbcalls++;                                              \
            if (!callback_may_call(F_##name)) RETURN(CUDA_ERROR_NOT_PERMITTED); \
        }                                                             \
    } while (0)
#define RETURN(r)    \
    do {             \
        CUresult r_ = (r); \
        unlock();    \
        return r_;   \
    } while (0)
#define NEED_INIT()                                       \
    do {                                                  \
        if (!g_initialized) RETURN(CUDA_ERROR_NOT_INITIALIZED); \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int dev_ok(CUdevice d) { return d >= 0 && d < g_ndev; }

/* Whether device a's contexts can map device b's memory (the topology). */
static int dev_can_access(CUdevice a, CUdevice b) { return a != b && !g_no_peer; }

/* A context's slot in g_peer: a primary context's device ordinal, or
 * FAKE_MAX_DEVICES for g_other; -1 for anything that is not a context of
 * an existing device. Never dereferences c. */
static int ctx_index(CUcontext c) {
    if (!c) return -1;
    if (c == &g_other) return FAKE_MAX_DEVICES;
    for (int k = 0; k < g_ndev; k++)
        if (c == &g_primary[k]) return k;
    return -1;
}

static struct CUgreenCtx_st *green_of_ctx(CUcontext c);
static int green_alive(const struct CUgreenCtx_st *g);

static int ctx_alive(CUcontext c) {
    int i = ctx_index(c);
    if (i < 0) return green_alive(green_of_ctx(c));
    return i == FAKE_MAX_DEVICES || g_primary_refs[i] > 0;
}

/* The usable current context, or NULL. */
static CUcontext current_ctx(void) { return (t_current && ctx_alive(t_current)) ? t_current : NULL; }

/* Maps a CUstream handle to the fake's stream: NULL, LEGACY and PER_THREAD
 * are the current context's legacy stream. *err gets the error on NULL. */
static struct CUstream_st *stream_of(CUstream h, CUresult *err) {
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        CUcontext c = current_ctx();
        if (!c) {
            *err = CUDA_ERROR_INVALID_CONTEXT;
            return NULL;
        }
        return c->legacy;
    }
    for (struct CUstream_st *s = g_streams; s; s = s->next_live)
        if (s == (struct CUstream_st *)h) return s;
    *err = CUDA_ERROR_INVALID_HANDLE;
    return NULL;
}

static struct CUevent_st *event_of(CUevent h) {
    for (struct CUevent_st *e = g_events; e; e = e->next_live)
        if (e == (struct CUevent_st *)h) return e;
    return NULL;
}

static struct alloc *alloc_containing(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    for (struct alloc *m = g_allocs; m; m = m->next) {
        uintptr_t b = (uintptr_t)m->p;
        if (a >= b && a - b <= m->bytes && bytes <= m->bytes - (a - b)) return m;
    }
    return NULL;
}

static void maybe_free_stream(struct CUstream_st *s) {
    if (!s->is_legacy && s->destroyed && s->pending == 0 && s->pins == 0) {
        free(s->cdeps.v);
        hb_clock_free(s->hb);
        s->magic = 0;
        free(s);
    }
}

static void maybe_free_event(struct CUevent_st *e) {
    if (e->destroyed && e->pending == 0 && e->pins == 0) {
        if (e->shared) munmap(e->shared, 4096);
        if (e->shared_fd >= 0) close(e->shared_fd);
        free(e->cdeps.v);
        hb_clock_free(e->hb);
        e->magic = 0;
        free(e);
    }
}

static int wait_value_met(const struct item *it) {
    uint32_t v = __atomic_load_n((uint32_t *)(uintptr_t)it->addr, __ATOMIC_ACQUIRE);
    uint32_t want = (uint32_t)it->value;
    switch (it->flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) {
    case CU_STREAM_WAIT_VALUE_GEQ: return (int32_t)(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return v == want;
    case CU_STREAM_WAIT_VALUE_AND: return (v & want) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return ~(v | want) != 0;
    default: return 1;
    }
}

/* Performs the effect of an item whose memory effects run under the lock
 * (everything but host functions and value waits). Called with the lock
 * held; the item is at the head of the queue or the queue is empty. */
static int untrack_alloc(void *p, int host);
static uint64_t hb_id(struct CUstream_st *s);
static void apply_work_locked(struct item *it);
static void apply_locked(struct item *it) {
    const long long begin = it->corr ? mono_ns() : 0;
    apply_work_locked(it);
    fake_obs_done_fn done = __atomic_load_n(&g_obs_done, __ATOMIC_ACQUIRE);
    if (!it->corr || !done || g_sticky) return;
    struct fake_cuda_activity a;
    memset(&a, 0, sizeof a);
    a.kind = it->kind == IT_KERNEL ? 1 : it->kind == IT_COPY ? 2 : 3;
    a.copy_kind = it->dst_checked ? (it->src_checked ? 8 : 1) : 2;
    a.corr = it->corr;
    a.ctx = it->stream->ctx;
    a.stream = hb_id(it->stream);
    a.name = it->kname;
    a.bytes = it->bytes;
    a.begin_ns = begin;
    a.end_ns = mono_ns();
    done(&a, __atomic_load_n(&g_obs_arg, __ATOMIC_ACQUIRE));
}
static void apply_work_locked(struct item *it) {
    if (g_fault_armed) {
        g_fault_armed = 0;
        g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    if (g_sticky) return; /* a faulted GPU does nothing more */
    switch (it->kind) {
    case IT_WRITE32:
    case IT_WRITE64: {
        size_t n = it->kind == IT_WRITE32 ? 4 : 8;
        if (!alloc_containing((void *)(uintptr_t)it->addr, n)) {
            g_badaccess++;
            g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            return;
        }
        if (n == 4)
            __atomic_store_n((uint32_t *)(uintptr_t)it->addr, (uint32_t)it->value, __ATOMIC_RELEASE);
        else
            __atomic_store_n((uint64_t *)(uintptr_t)it->addr, it->value, __ATOMIC_RELEASE);
        break;
    }
    case IT_COPY:
        if ((it->dst_checked && !alloc_containing(it->dst, it->bytes)) ||
            (it->src_checked && !alloc_containing(it->src, it->bytes))) {
            g_badaccess++;
            g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            return;
        }
        memmove(it->dst, it->src, it->bytes);
        break;
    case IT_MEMSET32:
        if (!alloc_containing(it->dst, it->bytes)) {
            g_badaccess++;
            g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            return;
        }
        for (size_t i = 0; i < it->bytes / 4; i++) ((uint32_t *)it->dst)[i] = (uint32_t)it->value;
        break;
    case IT_RECORD:
        it->event->time_ms = now_ms();
        if (it->event->shared) {
            uint32_t seq = (uint32_t)it->value, cur = __atomic_load_n(&it->event->shared->done, __ATOMIC_ACQUIRE);
            while ((int32_t)(seq - cur) > 0 &&
                   !__atomic_compare_exchange_n(&it->event->shared->done, &cur, seq, 0, __ATOMIC_RELEASE,
                                                __ATOMIC_ACQUIRE)) {
            }
        }
        break;
    case IT_FREE: /* cuMemFreeAsync: the memory goes when the stream reaches it */
        if (!untrack_alloc(it->dst, 0)) {
            g_badaccess++;
            g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            return;
        }
        free(it->dst);
        break;
    case IT_HOSTFN:
    case IT_WAIT32:
    case IT_NOP:
    case IT_KERNEL: /* a kernel of the fake does nothing */
        break;
    }
}

/* Bookkeeping after an item completed (lock held). */
static uint64_t g_hb_done; /* the FIFO number of the last item completed (hb_*) */
static void complete_locked(struct item *it) {
    if (it->hb_seq > g_hb_done) g_hb_done = it->hb_seq;
    it->stream->pending--;
    maybe_free_stream(it->stream);
    if (it->kind == IT_RECORD) {
        it->event->pending--;
        maybe_free_event(it->event);
    }
    pthread_cond_broadcast(&g_done_cv);
}

/* The callback thread: completes queued work in order while not held. */
static void *worker_main(void *arg) {
    (void)arg;
    t_in_callback = 1;
    lock();
    for (;;) {
        while (!g_head || g_hold) pthread_cond_wait(&g_work_cv, &g_mu);
        struct item *it = g_head;
        g_executing = 1;
        if (it->kind == IT_HOSTFN) {
            if (g_fault_armed) {
                g_fault_armed = 0;
                g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            }
            if (!g_sticky) {
                unlock();
                it->fn(it->user);
                lock();
            }
        } else if (it->kind == IT_WAIT32) {
            if (g_fault_armed) {
                g_fault_armed = 0;
                g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            }
            while (!g_sticky && !wait_value_met(it)) {
                if (!it->ipc && !alloc_containing((void *)(uintptr_t)it->addr, 4)) {
                    g_badaccess++;
                    g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
                    break;
                }
                unlock();
                struct timespec ts = {0, 50 * 1000};
                nanosleep(&ts, NULL);
                lock();
            }
        } else {
            apply_locked(it);
        }
        /* completion of a head item is not held back once started */
        g_executing = 0;
        g_head = it->next;
        if (!g_head) g_tail = NULL;
        g_queued--;
        complete_locked(it);
        free(it);
    }
    return NULL;
}

/* Enqueues (or, when nothing is queued and nothing held, performs) an item.
 * Lock held. Takes ownership of it. */
static CUresult capture_item_locked(struct item *it);

/* ---- hazards: happens-before tracking of device memory -------------------
 * Every item submitted (not captured) gets the next number of the FIFO; as
 * the FIFO completes in order, an item is unfinished exactly while its
 * number is above g_hb_done. A stream's clock lists, per other stream (by
 * id: addresses are reused), the highest number of that stream's work its
 * later work is ordered after: an event record snapshots its stream's clock
 * and its own number, cuStreamWaitEvent merges the event's snapshot into the
 * waiting stream's clock (transitively so). Host waits need no entry: the
 * work they waited for has completed. Entries of finished work are dropped.
 * Each device allocation keeps its unfinished accesses by stream-ordered
 * work: copies (destination written, source read), memsets, value writes
 * (written) and value waits (read), and a stream-ordered free. A new access
 * on stream S conflicts with an unfinished one of another stream T (write
 * with anything, a free with anything) unless S is ordered after it; two
 * streams of one context that are each blocking or legacy are taken as
 * ordered (the legacy stream's implicit synchronisation, not modelled
 * further). A conflict is a hazard: on a real GPU the memory could be read,
 * written or freed while T's work still uses it. Counted, the last one
 * described (fake_cuda_hazards, fake_cuda_live("hazards")). Kernels are not
 * looked into (the fake does not know which arguments are pointers), nor
 * synchronous copies and frees (they wait for everything), nor memory
 * opened with cuIpcOpenMemHandle (other processes' work is not followed). */
struct hb_entry {
    uint64_t id, seq;
};
struct hb_clock {
    size_t n, cap;
    struct hb_entry v[];
};
struct hb_access {
    uint64_t id, seq;    /* the stream's id, the item's number */
    CUcontext ctx;
    unsigned char write; /* 1 write, 2 free, 0 read */
    unsigned char implicit; /* the stream is legacy or blocking */
};
static uint64_t g_hb_seq, g_hb_ids;
static long g_hazards, g_hb_lost;
static char g_hazard_text[512];

static void hb_clock_free(struct hb_clock *c) { free(c); }

static uint64_t hb_id(struct CUstream_st *s) {
    if (!s->hb_id) s->hb_id = ++g_hb_ids;
    return s->hb_id;
}

static int hb_implicit(const struct CUstream_st *s) { return s->is_legacy || !(s->flags & CU_STREAM_NON_BLOCKING); }

/* Raises c's entry for id to seq (dropping finished entries on the way);
 * 0 when out of memory. */
static int hb_raise(struct hb_clock **pc, uint64_t id, uint64_t seq) {
    if (seq <= g_hb_done) return 1;
    struct hb_clock *c = *pc;
    size_t w = 0;
    int found = 0;
    for (size_t i = 0; c && i < c->n; i++) {
        if (c->v[i].seq <= g_hb_done) continue;
        if (c->v[i].id == id) {
            if (c->v[i].seq < seq) c->v[i].seq = seq;
            found = 1;
        }
        c->v[w++] = c->v[i];
    }
    if (c) c->n = w;
    if (found) return 1;
    if (!c || c->n == c->cap) {
        size_t cap = c ? c->cap * 2 : 4;
        struct hb_clock *g = (struct hb_clock *)realloc(c, sizeof *c + cap * sizeof c->v[0]);
        if (!g) return 0;
        if (!c) g->n = 0;
        g->cap = cap;
        *pc = c = g;
    }
    c->v[c->n++] = (struct hb_entry){id, seq};
    return 1;
}

static int hb_knows(const struct hb_clock *c, uint64_t id, uint64_t seq) {
    for (size_t i = 0; c && i < c->n; i++)
        if (c->v[i].id == id && c->v[i].seq >= seq) return 1;
    return 0;
}

static void hb_wait_locked(struct CUstream_st *s, const struct CUevent_st *e) {
    for (size_t i = 0; e->hb && i < e->hb->n; i++)
        if (e->hb->v[i].id != hb_id(s) && !hb_raise(&s->hb, e->hb->v[i].id, e->hb->v[i].seq)) g_hb_lost++;
}

static const char *const k_hb_what[] = {"reads", "writes", "frees"};

/* An access of `bytes` at p by item it (write: 1 write, 2 free, 0 read). */
static void hb_access_locked(const struct item *it, const void *p, size_t bytes, int write) {
    struct alloc *m = alloc_containing(p, bytes ? bytes : 1);
    if (!m || m->host || m->ipc) return; /* (another process's work on an import is not followed) */
    struct CUstream_st *s = it->stream;
    const uint64_t id = hb_id(s);
    size_t w = 0;
    for (size_t i = 0; i < m->nacc; i++) {
        const struct hb_access a = m->acc[i];
        if (a.seq <= g_hb_done) continue; /* finished */
        int ordered = a.id == id || (!write && !a.write) || hb_knows(s->hb, a.id, a.seq) ||
                      (a.implicit && hb_implicit(s) && a.ctx == s->ctx);
        if (!ordered) {
            g_hazards++;
            snprintf(g_hazard_text, sizeof g_hazard_text,
                     "stream %llu %s %p (%zu bytes at offset %zu of an allocation of %zu) while stream %llu's "
                     "%s of it (work item %llu; the FIFO has completed up to %llu) is unfinished and not ordered "
                     "before it",
                     (unsigned long long)id, k_hb_what[write], p, bytes, (size_t)((const char *)p - m->p), m->bytes,
                     (unsigned long long)a.id, a.write == 1 ? "write" : a.write == 2 ? "free" : "read",
                     (unsigned long long)a.seq, (unsigned long long)g_hb_done);
        }
        /* an access of this stream that the new one subsumes goes */
        if (a.id == id && (write || !a.write)) continue;
        m->acc[w++] = a;
    }
    m->nacc = w;
    if (m->nacc == m->cap_acc) {
        size_t cap = m->cap_acc ? m->cap_acc * 2 : 4;
        struct hb_access *g = (struct hb_access *)realloc(m->acc, cap * sizeof *g);
        if (!g) {
            g_hb_lost++;
            return;
        }
        m->acc = g;
        m->cap_acc = cap;
    }
    m->acc[m->nacc++] = (struct hb_access){id, it->hb_seq, s->ctx, (unsigned char)write, (unsigned char)hb_implicit(s)};
}

/* Numbers an item as it enters the FIFO and notes what it orders or uses. */
static void hb_submit_locked(struct item *it) {
    it->hb_seq = ++g_hb_seq;
    switch (it->kind) {
    case IT_RECORD: {
        struct CUevent_st *e = it->event;
        struct CUstream_st *s = it->stream;
        if (e->hb) e->hb->n = 0;
        int ok = hb_raise(&e->hb, hb_id(s), it->hb_seq);
        for (size_t i = 0; ok && s->hb && i < s->hb->n; i++) ok = hb_raise(&e->hb, s->hb->v[i].id, s->hb->v[i].seq);
        if (!ok) g_hb_lost++;
        break;
    }
    case IT_COPY:
        if (it->src_checked) hb_access_locked(it, it->src, it->bytes, 0);
        if (it->dst_checked) hb_access_locked(it, it->dst, it->bytes, 1);
        break;
    case IT_MEMSET32: hb_access_locked(it, it->dst, it->bytes, 1); break;
    case IT_WRITE32: hb_access_locked(it, (void *)(uintptr_t)it->addr, 4, 1); break;
    case IT_WRITE64: hb_access_locked(it, (void *)(uintptr_t)it->addr, 8, 1); break;
    case IT_WAIT32:
        if (!it->ipc) hb_access_locked(it, (void *)(uintptr_t)it->addr, 4, 0);
        break;
    case IT_FREE: hb_access_locked(it, it->dst, 0, 2); break;
    default: break;
    }
}

static CUresult submit_locked(struct item *it) {
    if (it->stream->cap) return capture_item_locked(it);
    hb_submit_locked(it);
    it->stream->pending++;
    if (it->kind == IT_RECORD) {
        it->event->pending++;
        it->event->recorded = 1;
        if (it->event->shared) it->value = __atomic_add_fetch(&it->event->shared->enqueued, 1, __ATOMIC_ACQ_REL);
    }
    int inline_ok = !g_head && !g_hold && it->kind != IT_HOSTFN &&
                    (it->kind != IT_WAIT32 || g_sticky || g_fault_armed || wait_value_met(it));
    if (inline_ok) {
        if (it->kind == IT_WAIT32) {
            if (g_fault_armed) {
                g_fault_armed = 0;
                g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
            }
        } else {
            apply_locked(it);
        }
        complete_locked(it);
        free(it);
        return CUDA_SUCCESS;
    }
    if (!g_worker_started) {
        if (pthread_create(&g_worker, NULL, worker_main, NULL) != 0) {
            it->stream->pending--;
            if (it->kind == IT_RECORD) it->event->pending--;
            free(it);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        pthread_detach(g_worker);
        g_worker_started = 1;
    }
    it->next = NULL;
    if (g_tail)
        g_tail->next = it;
    else
        g_head = it;
    g_tail = it;
    g_queued++;
    pthread_cond_signal(&g_work_cv);
    return CUDA_SUCCESS;
}

static struct item *new_item(enum item_kind kind, struct CUstream_st *s) {
    struct item *it = (struct item *)calloc(1, sizeof *it);
    if (it) {
        it->kind = kind;
        it->stream = s;
        if (kind == IT_KERNEL || kind == IT_COPY || kind == IT_MEMSET32) {
            it->corr = t_obs_corr; /* the observed call's (consumed) */
            t_obs_corr = 0;
        }
    }
    return it;
}

/* ---- capture and graphs (lock held) ---------------------------------------
 * A small model of the driver's capture: work enqueued on a capturing stream
 * becomes a node (its item kept for replay) depending on the stream's current
 * dependency set; an event recorded during capture carries that set; a
 * stream waiting on such an event joins the capture and takes the set. At
 * end, every other stream of the capture must have been waited for after its
 * last node (else UNJOINED). Synchronising or querying a capturing stream,
 * or waiting on an event recorded outside the capture, invalidates it. A
 * graph launch replays its items, in node order, on the launch stream
 * (conditional nodes and their bodies contribute nothing). */

struct CUgraphNode_st {
    uint32_t magic;
    struct CUgraph_st *graph;
    struct item *item;        /* captured work to replay (NULL: empty, child or conditional node) */
    struct CUgraph_st *child; /* child graph node: the node's own clone */
    struct deps deps;
    struct deps prog; /* the dependencies whose edge is programmatic (type 1) */
    int cooperative;  /* cuGraphKernelNodeSetAttribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE) */
    long dependents;
    /* conditional node ("conditional" feature) */
    int is_cond;
    int cond_type;
    unsigned nbodies;
    CUgraph bodies[2];        /* what params->conditional.phGraph_out points to */
    void *argp[16];           /* cuGraphKernelNodeGetParams: pointers into item->args */
};

/* A graph's kind: a clone is the private copy a child graph node holds (not
 * a handle the user can pass); the others are in g_graphs. */
enum { GRAPH_CLONE = 0, GRAPH_TOP = 1, GRAPH_BODY = 2 };

struct cond_handle {
    CUgraphConditionalHandle handle;
    CUcontext ctx;
};

struct CUgraph_st {
    uint32_t magic;
    struct CUgraphNode_st **nodes;
    size_t count, cap;
    int capturing;   /* a capture records into it */
    int invalidated; /* that capture was invalidated */
    int kind;        /* GRAPH_CLONE, GRAPH_TOP (cuGraphCreate / capture) or GRAPH_BODY */
    struct cond_handle *conds; /* conditional handles made on it */
    size_t nconds, capconds;
    struct CUgraph_st *next_live;
};

struct CUgraphExec_st {
    uint32_t magic;
    struct item **items;
    size_t count;
    uint64_t cond_shape; /* the conditional nodes' shape (cond_shape), for updates */
    struct CUgraphExec_st *next_live;
    int pers_loop, pers_cond; /* issue 38: a WHILE node at the top level; any conditional node */
};

#define MAGIC_GRAPH 0x47524146u
#define MAGIC_NODE 0x4e4f4446u
#define MAGIC_EXEC 0x45584546u

static struct CUgraph_st *g_graphs;
static struct CUgraphExec_st *g_execs;

static int deps_add(struct deps *d, struct CUgraphNode_st *n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->v[i] == n) return 1;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        void *p = realloc(d->v, cap * sizeof *d->v);
        if (!p) return 0;
        d->v = (struct CUgraphNode_st **)p;
        d->cap = cap;
    }
    d->v[d->n++] = n;
    return 1;
}

static void deps_free(struct deps *d) {
    free(d->v);
    d->v = NULL;
    d->n = d->cap = 0;
}

static struct CUgraph_st *graph_new(int kind) {
    struct CUgraph_st *g = (struct CUgraph_st *)calloc(1, sizeof *g);
    if (!g) return NULL;
    g->magic = MAGIC_GRAPH;
    g->kind = kind;
    if (kind != GRAPH_CLONE) {
        g->next_live = g_graphs;
        g_graphs = g;
        if (kind == GRAPH_TOP)
            g_live_graphs++;
        else
            g_live_bodies++;
    }
    return g;
}

static struct CUgraph_st *graph_of(CUgraph h) {
    for (struct CUgraph_st *g = g_graphs; g; g = g->next_live)
        if (g == (struct CUgraph_st *)h) return g;
    return NULL;
}

/* A child graph node's clone (cuGraphChildGraphNodeGetGraph) found under g. */
static struct CUgraph_st *clone_under(struct CUgraph_st *g, CUgraph h, int depth) {
    for (size_t i = 0; depth < 16 && i < g->count; i++) {
        struct CUgraph_st *c = g->nodes[i]->child;
        if (!c) continue;
        if (c == (struct CUgraph_st *)h) return c;
        if ((c = clone_under(c, h, depth + 1))) return c;
    }
    return NULL;
}

/* A graph handle, or a child graph node's clone (which can be queried). */
static struct CUgraph_st *graph_or_clone_of(CUgraph h) {
    struct CUgraph_st *g = graph_of(h);
    for (struct CUgraph_st *t = g_graphs; !g && t; t = t->next_live) g = clone_under(t, h, 0);
    return g;
}

static void capture_clear_locked(struct CUgraph_st *g);

static void graph_free(struct CUgraph_st *g) {
    /* a capture into it (or into a body of it) cannot go on recording into
     * freed memory: it ends */
    if (g->capturing) capture_clear_locked(g);
    for (size_t i = 0; i < g->count; i++) {
        struct CUgraphNode_st *n = g->nodes[i];
        free(n->item);
        if (n->child) graph_free(n->child);
        for (unsigned b = 0; b < n->nbodies; b++)
            if (n->bodies[b]) graph_free(n->bodies[b]);
        deps_free(&n->deps);
        deps_free(&n->prog);
        n->magic = 0;
        free(n);
    }
    free(g->nodes);
    free(g->conds);
    if (g->kind != GRAPH_CLONE) {
        struct CUgraph_st **pp = &g_graphs;
        while (*pp && *pp != g) pp = &(*pp)->next_live;
        if (*pp) *pp = g->next_live;
        if (g->kind == GRAPH_TOP)
            g_live_graphs--;
        else
            g_live_bodies--;
    }
    g->magic = 0;
    free(g);
}

/* 1 when g holds a conditional node (child graphs cannot: they are refused). */
static int graph_has_cond(const struct CUgraph_st *g) {
    for (size_t i = 0; i < g->count; i++)
        if (g->nodes[i]->is_cond) return 1;
    return 0;
}

/* A hash of the shape of g's conditional nodes: for each, its place, type
 * and number of bodies, and each body's nodes (kinds, dependencies' count,
 * nested conditionals). Graphs without conditional nodes all hash alike, so
 * cuGraphExecUpdate behaves for them as before the feature existed. */
static void shape_mix(uint64_t *h, uint64_t v) {
    *h ^= v;
    *h *= 1099511628211ull;
}
static void body_shape(const struct CUgraph_st *g, uint64_t *h);
static void cond_shape_into(const struct CUgraph_st *g, uint64_t *h) {
    for (size_t i = 0; i < g->count; i++) {
        const struct CUgraphNode_st *n = g->nodes[i];
        if (!n->is_cond) continue;
        shape_mix(h, i + 1);
        shape_mix(h, (uint64_t)n->cond_type);
        shape_mix(h, n->nbodies);
        for (unsigned b = 0; b < n->nbodies; b++) body_shape(n->bodies[b], h);
    }
}
static void body_shape(const struct CUgraph_st *g, uint64_t *h) {
    shape_mix(h, 0x62u);
    shape_mix(h, g->count);
    for (size_t i = 0; i < g->count; i++) {
        const struct CUgraphNode_st *n = g->nodes[i];
        shape_mix(h, n->is_cond ? 100u : n->child ? 101u : n->item ? (uint64_t)n->item->kind : 102u);
        shape_mix(h, n->deps.n);
        if (n->child) body_shape(n->child, h);
    }
    cond_shape_into(g, h);
}
static uint64_t cond_shape(const struct CUgraph_st *g) {
    uint64_t h = 14695981039346656037ull;
    cond_shape_into(g, &h);
    return h;
}

static struct CUgraphNode_st *node_add(struct CUgraph_st *g, const struct deps *deps) {
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)calloc(1, sizeof *n);
    if (!n) return NULL;
    if (g->count == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        void *p = realloc(g->nodes, cap * sizeof *g->nodes);
        if (!p) {
            free(n);
            return NULL;
        }
        g->nodes = (struct CUgraphNode_st **)p;
        g->cap = cap;
    }
    n->magic = MAGIC_NODE;
    n->graph = g;
    for (size_t i = 0; deps && i < deps->n; i++) {
        if (!deps_add(&n->deps, deps->v[i])) {
            deps_free(&n->deps);
            free(n);
            return NULL;
        }
        deps->v[i]->dependents++;
    }
    g->nodes[g->count++] = n;
    return n;
}

static int node_in(const struct CUgraph_st *g, const struct CUgraphNode_st *n) {
    for (size_t i = 0; i < g->count; i++)
        if (g->nodes[i] == n) return 1;
    return 0;
}

static CUresult capture_item_locked(struct item *it) {
    struct CUstream_st *s = it->stream;
    it->corr = 0; /* captured work is a node, not an activity */
    if (s->cap->invalidated) {
        free(it);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    struct CUgraphNode_st *n = node_add(s->cap, &s->cdeps);
    if (!n) {
        free(it);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    it->next = NULL;
    it->stream = NULL;
    n->item = it;
    s->cdeps.n = 0;
    deps_add(&s->cdeps, n);
    s->node_gen++;
    s->joined = 0;
    return CUDA_SUCCESS;
}

static CUresult capture_record_locked(struct CUstream_st *s, struct CUevent_st *e) {
    if (s->cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    e->cap_graph = s->cap;
    e->cap_stream = s;
    e->cap_gen = s->node_gen;
    e->cdeps.n = 0;
    for (size_t i = 0; i < s->cdeps.n; i++)
        if (!deps_add(&e->cdeps, s->cdeps.v[i])) return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

static int stream_live(const struct CUstream_st *x) {
    for (struct CUstream_st *s = g_streams; s; s = s->next_live)
        if (s == x) return 1;
    return 0;
}

/* Returns 1 when the wait was a capture matter (*r has the result). */
static int capture_wait_locked(struct CUstream_st *s, struct CUevent_st *e, CUresult *r) {
    int captured = e->cap_graph && graph_of(e->cap_graph) && e->cap_graph->capturing;
    if (!captured) {
        if (!s->cap) return 0;
        s->cap->invalidated = 1; /* waiting on work outside the capture */
        *r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        return 1;
    }
    struct CUgraph_st *g = e->cap_graph;
    if (s->cap && s->cap != g) {
        *r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        return 1;
    }
    if (!s->cap) { /* s joins the capture */
        s->cap = g;
        s->cap_origin = 0;
        s->cap_own_graph = 0;
        s->cdeps.n = 0;
        s->node_gen = 0;
        s->joined = 0;
    }
    for (size_t i = 0; i < e->cdeps.n; i++) deps_add(&s->cdeps, e->cdeps.v[i]);
    struct CUstream_st *src = e->cap_stream;
    if (src != s && stream_live(src) && src->cap == g && src->node_gen == e->cap_gen) src->joined = 1;
    *r = CUDA_SUCCESS;
    return 1;
}

/* Ends the capture into g on every stream taking part. */
static void capture_clear_locked(struct CUgraph_st *g) {
    for (struct CUstream_st *s = g_streams; s; s = s->next_live)
        if (s->cap == g) {
            s->cap = NULL;
            s->cap_origin = 0;
            deps_free(&s->cdeps);
        }
    g->capturing = 0;
}

/* Appends copies of g's items (children's included) to *v. */
static int flatten(const struct CUgraph_st *g, struct item ***v, size_t *n, size_t *cap) {
    for (size_t i = 0; i < g->count; i++) {
        const struct CUgraphNode_st *node = g->nodes[i];
        if (node->child) {
            if (!flatten(node->child, v, n, cap)) return 0;
            continue;
        }
        if (!node->item) continue;
        if (*n == *cap) {
            size_t c = *cap ? *cap * 2 : 8;
            void *p = realloc(*v, c * sizeof **v);
            if (!p) return 0;
            *v = (struct item **)p;
            *cap = c;
        }
        struct item *copy = (struct item *)malloc(sizeof *copy);
        if (!copy) return 0;
        *copy = *node->item;
        (*v)[(*n)++] = copy;
    }
    return 1;
}

/* g has no conditional nodes (add_node refuses such child graphs). */
static struct CUgraph_st *graph_clone(const struct CUgraph_st *g) {
    struct CUgraph_st *c = graph_new(GRAPH_CLONE);
    if (!c) return NULL;
    for (size_t i = 0; i < g->count; i++) {
        const struct CUgraphNode_st *src = g->nodes[i];
        struct deps d = {0};
        for (size_t k = 0; k < src->deps.n; k++)
            for (size_t j = 0; j < i; j++)
                if (g->nodes[j] == src->deps.v[k]) deps_add(&d, c->nodes[j]);
        struct CUgraphNode_st *n = node_add(c, &d);
        deps_free(&d);
        if (!n) goto fail;
        if (src->item) {
            n->item = (struct item *)malloc(sizeof *n->item);
            if (!n->item) goto fail;
            *n->item = *src->item;
        }
        if (src->child && !(n->child = graph_clone(src->child))) goto fail;
    }
    return c;
fail:
    graph_free(c);
    return NULL;
}

static void exec_items_free(struct item **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* ---- the driver entry points ------------------------------------------- */

FAKE_API CUresult cuInit(unsigned flags) {
    ENTER(cuInit);
    if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!g_devices_read) {
        /* the devices are fixed once the driver initialised */
        const char *env = getenv("FAKE_CUDA_DEVICES");
        if (env && *env) {
            char *end = NULL;
            long n = strtol(env, &end, 10);
            g_ndev = (*end == '\0' && n >= 1 && n <= FAKE_MAX_DEVICES) ? (int)n : 1;
        }
        env = getenv("FAKE_CUDA_NO_PEER");
        g_no_peer = env && *env && atoi(env) != 0;
        g_devices_read = 1;
    }
    g_initialized = 1;
    for (int k = 0; k < FAKE_MAX_DEVICES; k++) g_legacy_primary[k].ctx = &g_primary[k];
    g_legacy_other.ctx = &g_other;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDriverGetVersion(int *version) {
    ENTER(cuDriverGetVersion);
    if (!version) RETURN(CUDA_ERROR_INVALID_VALUE);
    *version = 13000;
    RETURN(CUDA_SUCCESS);
}

static const struct {
    int code;
    const char *name;
    const char *text;
} g_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space"},
    {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_text(CUresult error, const char **str, int name) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == error) {
            *str = name ? g_errors[i].name : g_errors[i].text;
            return CUDA_SUCCESS;
        }
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char **str) {
    ENTER(cuGetErrorName);
    RETURN(error_text(error, str, 1));
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char **str) {
    ENTER(cuGetErrorString);
    RETURN(error_text(error, str, 0));
}

FAKE_API CUresult cuDeviceGetCount(int *count) {
    ENTER(cuDeviceGetCount);
    NEED_INIT();
    if (!count) RETURN(CUDA_ERROR_INVALID_VALUE);
    *count = g_ndev;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    ENTER(cuDeviceGet);
    NEED_INIT();
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(ordinal)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    ENTER(cuDeviceGetName);
    NEED_INIT();
    if (!name || len <= 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "%s", "cuweave fake device");
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    ENTER(cuDeviceGetAttribute);
    NEED_INIT();
    if (!pi) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    int v;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 0x42 + dev; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 50 * 1024 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 3; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = !getenv("FAKE_CUDA_NO_COOPERATIVE"); break;
    default:
        if (attrib <= 0 || attrib > 200) RETURN(CUDA_ERROR_INVALID_VALUE);
        v = 0;
        break;
    }
    *pi = v;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
    ENTER(cuDeviceTotalMem);
    NEED_INIT();
    if (!bytes) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *bytes = (size_t)80 << 30;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    ENTER(cuDeviceGetUuid);
    NEED_INIT();
    if (!uuid) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    for (int i = 0; i < 16; i++) uuid->bytes[i] = (char)(0xc0 + i);
    uuid->bytes[0] = (char)(0xc0 + 0x10 * dev); /* differs per device */
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    ENTER(cuDevicePrimaryCtxRetain);
    NEED_INIT();
    if (!pctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    g_primary_refs[dev]++;
    *pctx = &g_primary[dev];
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    ENTER(cuDevicePrimaryCtxRelease);
    NEED_INIT();
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (g_primary_refs[dev] <= 0) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (--g_primary_refs[dev] == 0) {
        /* The real driver destroys the context and everything made on it,
         * its peer mappings (both ways) included. */
        for (struct CUstream_st *s = g_streams; s; s = s->next_live)
            if (s->ctx == &g_primary[dev]) g_orphans++;
        for (struct CUevent_st *e = g_events; e; e = e->next_live)
            if (e->ctx == &g_primary[dev]) g_orphans++;
        for (int j = 0; j < FAKE_NCTX; j++) {
            g_peers -= g_peer[dev][j] + g_peer[j][dev];
            g_peer[dev][j] = g_peer[j][dev] = 0;
        }
    }
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned *flags, int *active) {
    ENTER(cuDevicePrimaryCtxGetState);
    NEED_INIT();
    if (!flags || !active) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *flags = g_primary_flags[dev];
    *active = g_primary_refs[dev] > 0;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
    ENTER(cuCtxGetCurrent);
    NEED_INIT();
    if (!pctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    *pctx = t_current;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
    ENTER(cuCtxSetCurrent);
    NEED_INIT();
    if (ctx && ctx_index(ctx) < 0 && !green_of_ctx(ctx)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (ctx && !ctx_alive(ctx)) RETURN(CUDA_ERROR_CONTEXT_IS_DESTROYED);
    t_current = ctx;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxGetFlags(unsigned *flags) {
    ENTER(cuCtxGetFlags);
    NEED_INIT();
    if (!flags) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUcontext c = current_ctx();
    if (!c) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct CUctx_st *real = ctx_index(c) >= 0 ? (struct CUctx_st *)c : NULL;
    *flags = real ? real->flags : 0u; /* a green context's: the defaults */
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *device) {
    ENTER(cuCtxGetDevice);
    NEED_INIT();
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUcontext c = current_ctx();
    if (!c) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *device = c->dev;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxSynchronize(void) {
    ENTER(cuCtxSynchronize);
    NEED_INIT();
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (t_in_callback) RETURN(CUDA_ERROR_NOT_PERMITTED);
    pers_check_locked("cuCtxSynchronize", current_ctx());
    while (g_head && !g_sticky) pthread_cond_wait(&g_done_cv, &g_mu);
    RETURN(g_sticky);
}

FAKE_API CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    ENTER(cuCtxGetStreamPriorityRange);
    NEED_INIT();
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned *version) {
    ENTER(cuCtxGetApiVersion);
    NEED_INIT();
    if (!version) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx) ctx = current_ctx();
    if (!ctx || !ctx_alive(ctx)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *version = 3020;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamCreateWithPriority(CUstream *stream, unsigned flags, int priority) {
    ENTER(cuStreamCreateWithPriority);
    NEED_INIT();
    if (!stream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUcontext c = current_ctx();
    if (!c) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct CUstream_st *s = (struct CUstream_st *)calloc(1, sizeof *s);
    if (!s) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    s->magic = MAGIC_STREAM;
    s->ctx = c;
    s->flags = flags;
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    s->next_live = g_streams;
    g_streams = s;
    g_live_streams++;
    *stream = s;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamDestroy(CUstream stream) {
    ENTER(cuStreamDestroy);
    NEED_INIT();
    if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct CUstream_st **pp = &g_streams;
    while (*pp && *pp != (struct CUstream_st *)stream) pp = &(*pp)->next_live;
    if (!*pp) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct CUstream_st *s = *pp;
    *pp = s->next_live;
    g_live_streams--;
    s->destroyed = 1;
    pers_clear_locked(s);
    maybe_free_stream(s); /* pending work still completes */
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
    ENTER(cuStreamWaitEvent);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    if (!stream_of(stream, &err)) RETURN(err);
    if (!event_of(event)) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    {
        CUresult cr = CUDA_SUCCESS;
        if (capture_wait_locked(stream_of(stream, &err), event_of(event), &cr)) RETURN(cr);
    }
    /* One global FIFO: the recorded work always comes first. While the event
     * has records in flight, a no-op item keeps the waiting stream busy until
     * they completed (cuStreamQuery/Synchronize of it see the dependency). */
    struct CUevent_st *e = event_of(event);
    if (!e->imported) hb_wait_locked(stream_of(stream, &err), e);
    if (e->imported) {
        /* Records of another process: wait, in stream order, until the
         * record enqueued last (when this call is made) has completed. */
        uint32_t want = __atomic_load_n(&e->shared->enqueued, __ATOMIC_ACQUIRE);
        struct item *it = new_item(IT_WAIT32, stream_of(stream, &err));
        if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        it->addr = (CUdeviceptr)(uintptr_t)&e->shared->done;
        it->value = want;
        it->flags = CU_STREAM_WAIT_VALUE_GEQ;
        it->ipc = 1;
        CUresult r = submit_locked(it);
        if (r != CUDA_SUCCESS) RETURN(r);
    } else if (e->pending > 0) {
        struct item *it = new_item(IT_NOP, stream_of(stream, &err));
        if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        CUresult r = submit_locked(it);
        if (r != CUDA_SUCCESS) RETURN(r);
    }
    g_waits++;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamSynchronize(CUstream stream) {
    ENTER(cuStreamSynchronize);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (t_in_callback) RETURN(CUDA_ERROR_NOT_PERMITTED);
    if (s->cap) {
        s->cap->invalidated = 1;
        RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    /* s may be destroyed by another thread while we wait: pin it */
    s->pins++;
    while (s->pending > 0 && !g_sticky) pthread_cond_wait(&g_done_cv, &g_mu);
    s->pins--;
    pers_clear_locked(s);
    maybe_free_stream(s);
    RETURN(g_sticky);
}

FAKE_API CUresult cuStreamQuery(CUstream stream) {
    ENTER(cuStreamQuery);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (s->cap) {
        s->cap->invalidated = 1;
        RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    if (g_sticky || s->pending == 0) pers_clear_locked(s);
    if (g_sticky) RETURN(g_sticky);
    RETURN(s->pending > 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamGetPriority(CUstream stream, int *priority) {
    ENTER(cuStreamGetPriority);
    NEED_INIT();
    if (!priority) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    *priority = s->priority;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamGetFlags(CUstream stream, unsigned *flags) {
    ENTER(cuStreamGetFlags);
    NEED_INIT();
    if (!flags) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    *flags = s->flags;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamGetCtx(CUstream stream, CUcontext *pctx) {
    ENTER(cuStreamGetCtx);
    NEED_INIT();
    if (!pctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    *pctx = s->ctx;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamGetDevice(CUstream stream, CUdevice *device) {
    ENTER(cuStreamGetDevice);
    NEED_INIT();
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    *device = s->ctx->dev;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *user) {
    ENTER(cuLaunchHostFunc);
    NEED_INIT();
    if (!fn) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    struct item *it = new_item(IT_HOSTFN, s);
    if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    it->fn = fn;
    it->user = user;
    RETURN(submit_locked(it));
}

static CUresult write_value(CUstream stream, CUdeviceptr addr, uint64_t value, unsigned flags, int wide) {
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) return err;
    size_t n = wide ? 8 : 4;
    if (!addr || addr % n != 0 || flags > CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) return CUDA_ERROR_INVALID_VALUE;
    if (!alloc_containing((void *)(uintptr_t)addr, n)) return CUDA_ERROR_INVALID_VALUE;
    struct item *it = new_item(wide ? IT_WRITE64 : IT_WRITE32, s);
    if (!it) return CUDA_ERROR_OUT_OF_MEMORY;
    it->addr = addr;
    it->value = value;
    it->flags = flags;
    return submit_locked(it);
}

FAKE_API CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned flags) {
    ENTER(cuStreamWriteValue32);
    NEED_INIT();
    RETURN(write_value(stream, addr, value, flags, 0));
}

FAKE_API CUresult cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned flags) {
    ENTER(cuStreamWriteValue64);
    NEED_INIT();
    RETURN(write_value(stream, addr, value, flags, 1));
}

FAKE_API CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned flags) {
    ENTER(cuStreamWaitValue32);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (!addr || addr % 4 != 0 || (flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) > CU_STREAM_WAIT_VALUE_NOR)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!alloc_containing((void *)(uintptr_t)addr, 4)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct item *it = new_item(IT_WAIT32, s);
    if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    it->addr = addr;
    it->value = value;
    it->flags = flags;
    RETURN(submit_locked(it));
}

FAKE_API CUresult cuEventCreate(CUevent *event, unsigned flags) {
    ENTER(cuEventCreate);
    NEED_INIT();
    if (!event || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUcontext c = current_ctx();
    if (!c) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct CUevent_st *e = (struct CUevent_st *)calloc(1, sizeof *e);
    if (!e) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    e->magic = MAGIC_EVENT;
    e->ctx = c;
    e->flags = flags;
    e->shared_fd = -1;
    if (flags & CU_EVENT_INTERPROCESS) {
        e->shared_fd = memfd_create("fake-cuda-ipc-event", MFD_CLOEXEC);
        if (e->shared_fd < 0 || ftruncate(e->shared_fd, 4096) != 0 ||
            (e->shared = (struct ipc_word *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, e->shared_fd, 0)) ==
                MAP_FAILED) {
            if (e->shared_fd >= 0) close(e->shared_fd);
            free(e);
            RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        }
    }
    e->next_live = g_events;
    g_events = e;
    g_live_events++;
    *event = e;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuEventRecord(CUevent event, CUstream stream) {
    ENTER(cuEventRecord);
    NEED_INIT();
    struct CUevent_st *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (s->ctx != e->ctx) RETURN(CUDA_ERROR_INVALID_HANDLE); /* event and stream of different contexts */
    if (s->cap) RETURN(capture_record_locked(s, e));
    e->cap_graph = NULL;
    struct item *it = new_item(IT_RECORD, s);
    if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    it->event = e;
    RETURN(submit_locked(it));
}

FAKE_API CUresult cuEventDestroy(CUevent event) {
    ENTER(cuEventDestroy);
    NEED_INIT();
    struct CUevent_st **pp = &g_events;
    while (*pp && *pp != (struct CUevent_st *)event) pp = &(*pp)->next_live;
    if (!*pp) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct CUevent_st *e = *pp;
    *pp = e->next_live;
    g_live_events--;
    e->destroyed = 1;
    maybe_free_event(e);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuEventSynchronize(CUevent event) {
    ENTER(cuEventSynchronize);
    NEED_INIT();
    struct CUevent_st *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (t_in_callback) RETURN(CUDA_ERROR_NOT_PERMITTED);
    if (e->flags & CU_EVENT_BLOCKING_SYNC) g_sync_blocking++;
    e->pins++; /* pin against a concurrent destroy */
    g_sync_waiting++; /* seen by others only while it waits (the lock is held otherwise) */
    while (e->pending > 0 && !g_sticky) pthread_cond_wait(&g_done_cv, &g_mu);
    g_sync_waiting--;
    e->pins--;
    maybe_free_event(e);
    RETURN(g_sticky);
}

/* fake_cuda_event_query_needs_context: cuEventQuery refuses an event whose
 * context is not current (a driver that wanted one; the H100's does not). */
static int g_event_query_needs_ctx;

FAKE_API CUresult cuEventQuery(CUevent event) {
    ENTER(cuEventQuery);
    NEED_INIT();
    struct CUevent_st *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (g_event_query_needs_ctx && t_current != e->ctx) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (g_sticky) RETURN(g_sticky);
    if (e->imported)
        RETURN((int32_t)(__atomic_load_n(&e->shared->done, __ATOMIC_ACQUIRE) -
                         __atomic_load_n(&e->shared->enqueued, __ATOMIC_ACQUIRE)) >= 0
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_NOT_READY);
    RETURN(e->pending > 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}

FAKE_API CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    ENTER(cuEventElapsedTime);
    NEED_INIT();
    if (!ms) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUevent_st *a = event_of(start), *b = event_of(end);
    if (!a || !b) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (g_sticky) RETURN(g_sticky);
    if (!a->recorded || !b->recorded) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (a->pending || b->pending) RETURN(CUDA_ERROR_NOT_READY);
    double d = b->time_ms - a->time_ms;
    if (d < 0.001) d = 0.001; /* some positive value */
    *ms = (float)d;
    RETURN(CUDA_SUCCESS);
}

/* The largest allocation the fake makes (FAKE_CUDA_MEM_LIMIT, else 80 GiB). */
static size_t alloc_limit(void) {
    static size_t limit;
    if (!limit) {
        const char *env = getenv("FAKE_CUDA_MEM_LIMIT");
        unsigned long long v = env && *env ? strtoull(env, NULL, 10) : 0;
        limit = v ? (size_t)v : (size_t)80 << 30;
    }
    return limit;
}

static CUresult track_alloc(void *p, size_t bytes, int host) {
    struct alloc *m = (struct alloc *)malloc(sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->p = (char *)p;
    m->bytes = bytes;
    m->host = host;
    m->fd = -1;
    m->ipc = 0;
    m->acc = NULL;
    m->nacc = m->cap_acc = 0;
    m->next = g_allocs;
    g_allocs = m;
    if (host)
        g_live_hostmem++;
    else
        g_live_devmem++;
    return CUDA_SUCCESS;
}

/* Removes the allocation that starts at p; 1 when found. */
static int untrack_alloc(void *p, int host) {
    for (struct alloc **pp = &g_allocs; *pp; pp = &(*pp)->next)
        if ((*pp)->p == p && (*pp)->host == host) {
            struct alloc *m = *pp;
            *pp = m->next;
            free(m->acc);
            free(m);
            if (host)
                g_live_hostmem--;
            else
                g_live_devmem--;
            return 1;
        }
    return 0;
}

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned flags) {
    ENTER(cuMemHostAlloc);
    NEED_INIT();
    if (!pp || bytes == 0 || (flags & ~7u)) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (bytes > alloc_limit()) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    void *p = calloc(1, bytes);
    if (!p) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    if (track_alloc(p, bytes, 1) != CUDA_SUCCESS) {
        free(p);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    *pp = p;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemFreeHost(void *p) {
    ENTER(cuMemFreeHost);
    NEED_INIT();
    pers_check_locked("cuMemFreeHost", NULL);
    if (!untrack_alloc(p, 1)) RETURN(CUDA_ERROR_INVALID_VALUE);
    free(p);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned flags) {
    ENTER(cuMemHostGetDevicePointer);
    NEED_INIT();
    if (!dptr || flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct alloc *m = alloc_containing(p, 1);
    if (!m || !m->host) RETURN(CUDA_ERROR_INVALID_VALUE);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytes) {
    ENTER(cuMemAlloc);
    NEED_INIT();
    if (!dptr || bytes == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (bytes > alloc_limit()) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    /* A memfd mapped shared: another process can map the same pages
     * (cuIpcOpenMemHandle). */
    int fd = memfd_create("fake-cuda-mem", MFD_CLOEXEC);
    if (fd < 0) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0) p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (track_alloc(p, bytes, 0) != CUDA_SUCCESS) {
        munmap(p, bytes);
        close(fd);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    g_allocs->fd = fd;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    RETURN(CUDA_SUCCESS);
}

/* The cuMemAlloc allocation (not imported) that starts at p. */
static struct alloc *mapped_alloc_at(const void *p) {
    for (struct alloc *m = g_allocs; m; m = m->next)
        if (m->p == (const char *)p && !m->host && !m->ipc && m->fd >= 0) return m;
    return NULL;
}

FAKE_API CUresult cuMemFree(CUdeviceptr dptr) {
    ENTER(cuMemFree);
    NEED_INIT();
    void *p = (void *)(uintptr_t)dptr;
    pers_check_locked("cuMemFree", NULL);
    struct alloc *m = mapped_alloc_at(p);
    if (!m) RETURN(CUDA_ERROR_INVALID_VALUE);
    size_t bytes = m->bytes;
    int fd = m->fd;
    untrack_alloc(p, 0);
    munmap(p, bytes);
    close(fd);
    RETURN(CUDA_SUCCESS);
}

/* ---- interprocess memory and events ---- */

static int ipc_handle_read(const char *raw, uint32_t magic, struct ipc_handle *h) {
    memcpy(h, raw, sizeof *h);
    return h->magic == magic && h->pid > 0 && h->fd >= 0;
}

/* Opens the exporter's memfd through /proc; -1 (errno set) when gone. */
static int ipc_open_fd(const struct ipc_handle *h) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

FAKE_API CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    ENTER(cuIpcGetMemHandle);
    NEED_INIT();
    if (!handle) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct alloc *m = mapped_alloc_at((void *)(uintptr_t)dptr);
    if (!m) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct ipc_handle h = {IPC_MAGIC_MEM, (int32_t)getpid(), m->fd, 0, m->bytes};
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuIpcOpenMemHandle(CUdeviceptr *dptr, CUipcMemHandle handle, unsigned flags) {
    ENTER(cuIpcOpenMemHandle);
    NEED_INIT();
    struct ipc_handle h;
    if (!dptr || flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ||
        !ipc_handle_read(handle.reserved, IPC_MAGIC_MEM, &h) || h.bytes == 0)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (h.pid == (int32_t)getpid()) RETURN(CUDA_ERROR_INVALID_CONTEXT); /* as the real driver */
    int fd = ipc_open_fd(&h);
    if (fd < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
    void *p = mmap(NULL, (size_t)h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (track_alloc(p, (size_t)h.bytes, 0) != CUDA_SUCCESS) {
        munmap(p, (size_t)h.bytes);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    g_allocs->fd = -1;
    g_allocs->ipc = 1;
    g_live_devmem--;
    g_live_ipcmem++;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    ENTER(cuIpcCloseMemHandle);
    NEED_INIT();
    for (struct alloc **pp = &g_allocs; *pp; pp = &(*pp)->next)
        if ((*pp)->p == (char *)(uintptr_t)dptr && (*pp)->ipc) {
            struct alloc *m = *pp;
            *pp = m->next;
            munmap(m->p, m->bytes);
            free(m->acc);
            free(m);
            g_live_ipcmem--;
            RETURN(CUDA_SUCCESS);
        }
    RETURN(CUDA_ERROR_INVALID_VALUE);
}

/* The device allocation (cuMemAlloc'd, from a pool, or an imported
 * mapping) that holds dptr: its start and size. */
FAKE_API CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
    ENTER(cuMemGetAddressRange);
    NEED_INIT();
    const char *p = (const char *)(uintptr_t)dptr;
    for (struct alloc *m = g_allocs; m; m = m->next)
        if (!m->host && p >= m->p && p < m->p + m->bytes) {
            if (base) *base = (CUdeviceptr)(uintptr_t)m->p;
            if (size) *size = m->bytes;
            RETURN(CUDA_SUCCESS);
        }
    RETURN(CUDA_ERROR_NOT_FOUND);
}

FAKE_API CUresult cuIpcGetEventHandle(CUipcEventHandle *handle, CUevent event) {
    ENTER(cuIpcGetEventHandle);
    NEED_INIT();
    if (!handle) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUevent_st *e = event_of(event);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!e->shared || e->imported) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct ipc_handle h = {IPC_MAGIC_EVENT, (int32_t)getpid(), e->shared_fd, 0, 4096};
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuIpcOpenEventHandle(CUevent *event, CUipcEventHandle handle) {
    ENTER(cuIpcOpenEventHandle);
    NEED_INIT();
    struct ipc_handle h;
    if (!event || !ipc_handle_read(handle.reserved, IPC_MAGIC_EVENT, &h)) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUcontext c = current_ctx();
    if (!c) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (h.pid == (int32_t)getpid()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    int fd = ipc_open_fd(&h);
    if (fd < 0) RETURN(CUDA_ERROR_INVALID_HANDLE);
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (page == MAP_FAILED) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct CUevent_st *e = (struct CUevent_st *)calloc(1, sizeof *e);
    if (!e) {
        munmap(page, 4096);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    e->magic = MAGIC_EVENT;
    e->ctx = c;
    e->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
    e->shared = (struct ipc_word *)page;
    e->shared_fd = -1;
    e->imported = 1;
    e->next_live = g_events;
    g_events = e;
    g_live_events++;
    *event = e;
    RETURN(CUDA_SUCCESS);
}

/* Synchronous copies wait for the legacy stream (and so everything) first. */
static CUresult sync_copy(void *dst, const void *src, size_t bytes) {
    if (!current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_in_callback) return CUDA_ERROR_NOT_PERMITTED;
    while (g_head && !g_sticky) pthread_cond_wait(&g_done_cv, &g_mu);
    if (g_sticky) return g_sticky;
    memmove(dst, src, bytes);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
    ENTER(cuMemcpyHtoD);
    NEED_INIT();
    if (!src || !alloc_containing((void *)(uintptr_t)dst, bytes)) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(sync_copy((void *)(uintptr_t)dst, src, bytes));
}

FAKE_API CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
    ENTER(cuMemcpyDtoH);
    NEED_INIT();
    if (!dst || !alloc_containing((void *)(uintptr_t)src, bytes)) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(sync_copy(dst, (const void *)(uintptr_t)src, bytes));
}

static CUresult async_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes, CUstream stream) {
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) return err;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    if ((dst_dev && !alloc_containing(dst, bytes)) || (src_dev && !alloc_containing(src, bytes)))
        return CUDA_ERROR_INVALID_VALUE;
    struct item *it = new_item(IT_COPY, s);
    if (!it) return CUDA_ERROR_OUT_OF_MEMORY;
    it->dst = dst;
    it->src = src;
    it->bytes = bytes;
    it->dst_checked = dst_dev;
    it->src_checked = src_dev;
    return submit_locked(it);
}

FAKE_API CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream) {
    obs_enter("cuMemcpyHtoDAsync");
    ENTER(cuMemcpyHtoDAsync);
    NEED_INIT();
    RETURN(async_copy((void *)(uintptr_t)dst, 1, src, 0, bytes, stream));
}

FAKE_API CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    obs_enter("cuMemcpyDtoHAsync");
    ENTER(cuMemcpyDtoHAsync);
    NEED_INIT();
    RETURN(async_copy(dst, 0, (const void *)(uintptr_t)src, 1, bytes, stream));
}

FAKE_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t count, CUstream stream) {
    obs_enter("cuMemsetD32Async");
    ENTER(cuMemsetD32Async);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (dst % 4 != 0 || !alloc_containing((void *)(uintptr_t)dst, count * 4)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct item *it = new_item(IT_MEMSET32, s);
    if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    it->dst = (void *)(uintptr_t)dst;
    it->value = value;
    it->bytes = count * 4;
    RETURN(submit_locked(it));
}

/* ---- peer access ----------------------------------------------------------
 * The topology: any two different devices can access each other unless
 * FAKE_CUDA_NO_PEER is set. Peer access is recorded per (context, peer
 * context) pair; it changes nothing but what cuMemcpyPeerAsync counts. */

FAKE_API CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    ENTER(cuDeviceCanAccessPeer);
    NEED_INIT();
    if (!can) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev) || !dev_ok(peer)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *can = dev_can_access(dev, peer);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDeviceGetP2PAttribute(int *value, int attrib, CUdevice src, CUdevice dst) {
    ENTER(cuDeviceGetP2PAttribute);
    NEED_INIT();
    if (!value) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(src) || !dev_ok(dst) || src == dst) RETURN(CUDA_ERROR_INVALID_DEVICE);
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: *value = dev_can_access(src, dst); break;
    default: RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
    ENTER(cuCtxEnablePeerAccess);
    NEED_INIT();
    CUcontext c = current_ctx();
    if (!c) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_alive(peer)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (peer->dev == c->dev) RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (!dev_can_access(c->dev, peer->dev)) RETURN(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    unsigned char *on = &g_peer[ctx_index(c)][ctx_index(peer)];
    if (*on) RETURN(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    *on = 1;
    g_peers++;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                                    size_t bytes, CUstream stream) {
    obs_enter("cuMemcpyPeerAsync");
    ENTER(cuMemcpyPeerAsync);
    NEED_INIT();
    if (!ctx_alive(dst_ctx) || !ctx_alive(src_ctx)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct alloc *d = alloc_containing((void *)(uintptr_t)dst, bytes);
    struct alloc *s = alloc_containing((void *)(uintptr_t)src, bytes);
    if (!dst || !src || !d || d->host || !s || s->host) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r = async_copy((void *)(uintptr_t)dst, 1, (const void *)(uintptr_t)src, 1, bytes, stream);
    if (r == CUDA_SUCCESS) {
        int a = ctx_index(dst_ctx), b = ctx_index(src_ctx);
        if (dst_ctx->dev == src_ctx->dev || g_peer[a][b] || g_peer[b][a])
            g_peer_direct++;
        else
            g_peer_staged++;
    }
    RETURN(r);
}

/* ---- stream-ordered memory pools ---------------------------------------- */
/* A pool is a counted object; cuMemAllocFromPoolAsync allocates at once
 * (tracked like cuMemAlloc's memory, counted in "devmem"); cuMemFreeAsync is a
 * work item that frees when its stream reaches it, so a use of the memory
 * after it faults as a bad access. Both refuse a capturing stream
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: the fake has no memory nodes). */
struct CUmemPoolHandle_st {
    uint32_t magic;
    int attrs[8];
    cuuint64_t threshold;
    int dev;                      /* props->location.id */
    int access[FAKE_MAX_DEVICES]; /* cuMemPoolSetAccess flags, per device */
    struct CUmemPoolHandle_st *next_live;
};
#define MAGIC_POOL 0x504f4f4cu

static struct CUmemPoolHandle_st *g_pools;

/* The live pool h is, or NULL (never dereferences h). */
static struct CUmemPoolHandle_st *pool_of(CUmemoryPool h) {
    for (struct CUmemPoolHandle_st *p = g_pools; p; p = p->next_live)
        if (p == h) return p;
    return NULL;
}

FAKE_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    ENTER(cuMemPoolCreate);
    NEED_INIT();
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !dev_ok(props->location.id))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUmemPoolHandle_st *p = (struct CUmemPoolHandle_st *)calloc(1, sizeof *p);
    if (!p) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    p->magic = MAGIC_POOL;
    p->dev = props->location.id;
    p->access[p->dev] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; /* the others: PROT_NONE */
    p->next_live = g_pools;
    g_pools = p;
    p->attrs[CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = 1;
    p->attrs[CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC] = 1;
    p->attrs[CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES] = 1;
    g_live_mempools++;
    *pool = p;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    ENTER(cuMemPoolDestroy);
    NEED_INIT();
    struct CUmemPoolHandle_st **pp = &g_pools;
    while (*pp && *pp != pool) pp = &(*pp)->next_live;
    if (!pool || !*pp) RETURN(CUDA_ERROR_INVALID_VALUE);
    *pp = pool->next_live;
    pool->magic = 0;
    free(pool);
    g_live_mempools--;
    RETURN(CUDA_SUCCESS);
}

static CUresult pool_attr(CUmemoryPool pool, int attr, void *value, int set) {
    if (!pool_of(pool) || !value) return CUDA_ERROR_INVALID_VALUE;
    if (attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
        attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
        if (set) pool->attrs[attr] = *(int *)value;
        else *(int *)value = pool->attrs[attr];
        return CUDA_SUCCESS;
    }
    if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
        if (set) pool->threshold = *(cuuint64_t *)value;
        else *(cuuint64_t *)value = pool->threshold;
        return CUDA_SUCCESS;
    }
    if (attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT && !set) {
        *(cuuint64_t *)value = 0;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value) {
    ENTER(cuMemPoolSetAttribute);
    NEED_INIT();
    RETURN(pool_attr(pool, attr, value, 1));
}

FAKE_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value) {
    ENTER(cuMemPoolGetAttribute);
    NEED_INIT();
    RETURN(pool_attr(pool, attr, value, 0));
}

/* Access of other devices to a pool's memory: stored per (pool, device),
 * checked against the topology; nothing enforces it (memory is host memory). */
FAKE_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
    ENTER(cuMemPoolSetAccess);
    NEED_INIT();
    struct CUmemPoolHandle_st *p = pool_of(pool);
    if (!p || (count > 0 && !map)) RETURN(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++) { /* all checked before any is applied */
        const CUmemAccessDesc *d = &map[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE) RETURN(CUDA_ERROR_INVALID_VALUE);
        if (!dev_ok(d->location.id)) RETURN(CUDA_ERROR_INVALID_DEVICE);
        if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            RETURN(CUDA_ERROR_INVALID_VALUE);
        if (d->location.id == p->dev && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            RETURN(CUDA_ERROR_INVALID_DEVICE); /* the owner keeps full access */
        if (d->location.id != p->dev && !dev_can_access(d->location.id, p->dev))
            RETURN(CUDA_ERROR_INVALID_DEVICE);
    }
    for (size_t i = 0; i < count; i++) p->access[map[i].location.id] = map[i].flags;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemPoolGetAccess(int *flags, CUmemoryPool pool, CUmemLocation *location) {
    ENTER(cuMemPoolGetAccess);
    NEED_INIT();
    struct CUmemPoolHandle_st *p = pool_of(pool);
    if (!flags || !p || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(location->id)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *flags = p->access[location->id];
    RETURN(CUDA_SUCCESS);
}

/* The fake pool's attribute, for tests (-1 for a bad pool or attribute). */
FAKE_API long fake_cuda_pool_attr(CUmemoryPool pool, int attr) {
    long v = -1;
    lock();
    if (pool_of(pool) && attr >= 1 && attr <= 3) v = pool->attrs[attr];
    unlock();
    return v;
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
    ENTER(cuMemAllocFromPoolAsync);
    NEED_INIT();
    if (!dptr || bytes == 0 || !pool_of(pool)) RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (s->cap) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (bytes > alloc_limit()) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    void *p = malloc(bytes);
    if (!p) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    if (track_alloc(p, bytes, 0) != CUDA_SUCCESS) {
        free(p);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    RETURN(CUDA_SUCCESS);
}

/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static __thread int t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* As the driver treats a capture-unsafe call (a stream-ordered free, say)
 * made while a capture is open: unless the calling thread's mode is
 * relaxed, a GLOBAL capture (any thread) or a THREAD_LOCAL one this thread
 * began refuses it and is invalidated. 1 when the call is refused. */
static int unsafe_during_capture_locked(void) {
    if (t_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return 0;
    int refused = 0;
    for (struct CUstream_st *s = g_streams; s; s = s->next_live)
        if (s->cap && s->cap_origin &&
            (s->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
             (s->cap_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && pthread_equal(s->cap_thread, pthread_self())))) {
            s->cap->invalidated = 1;
            refused = 1;
        }
    return refused;
}

FAKE_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    ENTER(cuThreadExchangeStreamCaptureMode);
    if (!mode || (int)*mode < 0 || (int)*mode > CU_STREAM_CAPTURE_MODE_RELAXED) RETURN(CUDA_ERROR_INVALID_VALUE);
    const int prev = t_capture_mode;
    t_capture_mode = (int)*mode;
    *mode = (CUstreamCaptureMode)prev;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    ENTER(cuMemFreeAsync);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (s->cap) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (unsafe_during_capture_locked()) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (!alloc_containing((void *)(uintptr_t)dptr, 1)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct item *it = new_item(IT_FREE, s);
    if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    it->dst = (void *)(uintptr_t)dptr;
    RETURN(submit_locked(it));
}

FAKE_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    (void)module;
    (void)image;
    ENTER(cuModuleLoadData);
    pers_check_locked("cuModuleLoadData", NULL);
    RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

FAKE_API CUresult cuModuleUnload(CUmodule module) {
    (void)module;
    ENTER(cuModuleUnload);
    pers_check_locked("cuModuleUnload", NULL);
    RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name) {
    (void)fn;
    (void)module;
    (void)name;
    ENTER(cuModuleGetFunction);
    RETURN(CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- the library API and launches ("library" feature) ---------------------
 * A library holds the kernels asked of it by name; a kernel holds its one
 * function (the same for every context). Unloading a library frees its
 * kernels: their handles (and functions) are invalid afterwards. */

struct CUfunc_st {
    uint32_t magic;
    struct CUkern_st *kernel;
};

struct CUkern_st {
    uint32_t magic;
    struct CUlib_st *lib;
    char *name;
    struct CUfunc_st fn;
    struct CUkern_st *next;
};

struct CUlib_st {
    uint32_t magic;
    struct CUkern_st *kernels;
    struct CUlib_st *next_live;
};

#define MAGIC_LIB 0x4c494246u
#define MAGIC_KERNEL 0x4b524e46u
#define MAGIC_FUNC 0x46554e46u

static struct CUlib_st *g_libs;

static struct CUlib_st *lib_of(CUlibrary h) {
    for (struct CUlib_st *l = g_libs; l; l = l->next_live)
        if (l == (struct CUlib_st *)h) return l;
    return NULL;
}

static struct CUkern_st *kernel_of(CUkernel h) {
    for (struct CUlib_st *l = g_libs; l; l = l->next_live)
        for (struct CUkern_st *k = l->kernels; k; k = k->next)
            if (k == (struct CUkern_st *)h) return k;
    return NULL;
}

/* The kernel a launch's function stands for: a kernel's function, or a
 * CUkernel cast to CUfunction (as the real driver accepts). */
static struct CUkern_st *kernel_of_function(CUfunction f) {
    for (struct CUlib_st *l = g_libs; l; l = l->next_live)
        for (struct CUkern_st *k = l->kernels; k; k = k->next)
            if ((void *)k == (void *)f || &k->fn == (struct CUfunc_st *)f) return k;
    return NULL;
}

/* Parameter `index` of a kernel named "name#8,4,8" (see the top comment): 1
 * and its offset and size, or 0 past the last one. */
static int param_of_name(const char *name, size_t index, size_t *offset, size_t *size) {
    const char *p = strrchr(name, '#');
    size_t at = 0;
    for (size_t i = 0; p && p[1]; i++) {
        char *end = NULL;
        const unsigned long n = strtoul(p + 1, &end, 10);
        if (end == p + 1 || n == 0) break; /* malformed: no more parameters */
        const size_t align = n < 8 ? n : 8;
        at = (at + align - 1) / align * align;
        if (i == index) {
            *offset = at;
            if (size) *size = n;
            return 1;
        }
        at += n;
        p = *end == ',' ? end : NULL;
    }
    return 0;
}

/* A launch of kernel k: a no-op work item in stream order, or a kernel node
 * during a capture (with a copy of its arguments). Lock held. */
static CUresult launch_locked(struct CUkern_st *k, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, CUstream stream, void **params) {
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) return err;
    if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
    if ((uint64_t)bx * by * bz > 1024 || bz > 64 || shared > 232448) return CUDA_ERROR_INVALID_VALUE;
    struct item *it = new_item(IT_KERNEL, s);
    if (!it) return CUDA_ERROR_OUT_OF_MEMORY;
    it->user = k; /* for debugging only: never dereferenced (it may outlive the library) */
    it->func = &k->fn;
    snprintf(it->kname, sizeof it->kname, "%s", k->name);
    size_t off = 0, size = 0;
    for (unsigned i = 0; i < 16 && params && param_of_name(k->name, i, &off, &size) && off + size <= sizeof it->args;
         i++) {
        memcpy(it->args + off, params[i], size);
        it->param_off[i] = (unsigned short)off;
        it->nparams = i + 1;
    }
    return submit_locked(it);
}

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, CUstream stream, void **params, void **extra) {
    (void)extra;
    obs_enter("cuLaunchKernel");
    ENTER(cuLaunchKernel);
    struct CUkern_st *k = f ? kernel_of_function(f) : NULL;
    if (!k) RETURN(CUDA_ERROR_NOT_SUPPORTED); /* the fake loads no modules: no other function exists */
    NEED_INIT();
    RETURN(launch_locked(k, gx, gy, gz, bx, by, bz, shared, stream, params));
}

/* The last cuLaunchKernelEx's shape (fake_cuda_last_launch). */
static unsigned g_last_launch[5];

FAKE_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
    (void)extra;
    obs_enter("cuLaunchKernelEx");
    ENTER(cuLaunchKernelEx);
    NEED_INIT();
    if (!config || !f || (config->numAttrs && !config->attrs)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUkern_st *k = kernel_of_function(f);
    if (!k) RETURN(CUDA_ERROR_INVALID_HANDLE);
    unsigned coop = 0;
    for (unsigned i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) coop = config->attrs[i].value.cooperative != 0;
    g_last_launch[0] = config->gridDimX;
    g_last_launch[1] = config->blockDimX;
    g_last_launch[2] = config->sharedMemBytes;
    g_last_launch[3] = coop;
    g_last_launch[4]++;
    CUresult r = launch_locked(k, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                               config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream, params);
    if (r == CUDA_SUCCESS && coop && (!strcmp(k->name, "cwf_resident_loop") || !strcmp(k->name, "cwf_dataflow_loop"))) {
        CUresult err = CUDA_SUCCESS;
        pers_mark_locked(stream_of(config->hStream, &err));
    }
    RETURN(r);
}

/* The image is one the driver loads (see the top comment). Reads byte by
 * byte, so that text shorter than a magic is not read past its NUL. */
static int image_starts(const unsigned char *b, const char *magic, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)magic[i]) return 0;
    return 1;
}

static int image_valid(const void *code) {
    const unsigned char *b = (const unsigned char *)code;
    if (image_starts(b, "\x7f" "ELF", 4)) return b[4] == 2 && b[5] == 1 && (b[18] | b[19] << 8) == 190;
    if (image_starts(b, "\x50\xed\x55\xba", 4)) return (b[4] | b[5] << 8) == 1 && (b[6] | b[7] << 8) >= 16;
    if (image_starts(b, "\xb1\x43\x62\x46", 4)) return (b[4] == 1 || b[4] == 2) && !b[5] && !b[6] && !b[7];
    if (image_starts(b, "FAKECUBIN", 9) || image_starts(b, "//FAKEPTX", 9)) return 1; /* the fake NVRTC's code */
    size_t i = 0;
    for (;;) {
        while (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == '\f' || b[i] == '\v') i++;
        if (b[i] == '/' && b[i + 1] == '/') {
            while (b[i] && b[i] != '\n') i++;
        } else if (b[i] == '/' && b[i + 1] == '*') {
            i += 2;
            while (b[i] && !(b[i] == '*' && b[i + 1] == '/')) i++;
            if (!b[i]) return 0;
            i += 2;
        } else {
            break;
        }
    }
    return strncmp((const char *)b + i, ".version", 8) == 0 &&
           (b[i + 8] == ' ' || b[i + 8] == '\t' || b[i + 8] == '\n' || b[i + 8] == '\r');
}

FAKE_API CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jit_options, void **jit_values,
                                    unsigned n_jit, CUlibraryOption *lib_options, void **lib_values, unsigned n_lib) {
    (void)jit_options, (void)jit_values, (void)n_jit, (void)lib_options, (void)lib_values, (void)n_lib;
    ENTER(cuLibraryLoadData);
    NEED_INIT();
    if (!lib || !code) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!image_valid(code)) RETURN(CUDA_ERROR_INVALID_IMAGE);
    pers_check_locked("cuLibraryLoadData", NULL);
    struct CUlib_st *l = (struct CUlib_st *)calloc(1, sizeof *l);
    if (!l) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    l->magic = MAGIC_LIB;
    l->next_live = g_libs;
    g_libs = l;
    g_live_libs++;
    *lib = l;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuLibraryUnload(CUlibrary lib) {
    ENTER(cuLibraryUnload);
    NEED_INIT();
    if (lib_of(lib)) pers_check_locked("cuLibraryUnload", NULL);
    struct CUlib_st **pp = &g_libs;
    while (*pp && *pp != (struct CUlib_st *)lib) pp = &(*pp)->next_live;
    if (!*pp) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct CUlib_st *l = *pp;
    *pp = l->next_live;
    g_live_libs--;
    while (l->kernels) {
        struct CUkern_st *k = l->kernels;
        l->kernels = k->next;
        free(k->name);
        k->magic = 0;
        k->fn.magic = 0;
        free(k);
        g_live_kernels--;
    }
    l->magic = 0;
    free(l);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary lib, const char *name) {
    ENTER(cuLibraryGetKernel);
    NEED_INIT();
    if (!kernel || !name) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUlib_st *l = lib_of(lib);
    if (!l) RETURN(CUDA_ERROR_INVALID_HANDLE);
    for (struct CUkern_st *k = l->kernels; k; k = k->next)
        if (!strcmp(k->name, name)) {
            *kernel = k;
            RETURN(CUDA_SUCCESS);
        }
    struct CUkern_st *k = (struct CUkern_st *)calloc(1, sizeof *k);
    char *n = strdup(name);
    if (!k || !n) {
        free(k);
        free(n);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    k->magic = MAGIC_KERNEL;
    k->lib = l;
    k->name = n;
    k->fn.magic = MAGIC_FUNC;
    k->fn.kernel = k;
    k->next = l->kernels;
    l->kernels = k;
    g_live_kernels++;
    *kernel = k;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuKernelGetFunction(CUfunction *f, CUkernel kernel) {
    ENTER(cuKernelGetFunction);
    NEED_INIT();
    if (!f) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUkern_st *k = kernel_of(kernel);
    if (!k) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *f = &k->fn;
    RETURN(CUDA_SUCCESS);
}

/* Blocks of f that fit on one SM: 2048 threads and 228 KiB of shared
 * memory an SM, at most 32 blocks; $FAKE_CUDA_OCCUPANCY (read at each call)
 * instead when set. */
FAKE_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction f, int block_threads,
                                                              size_t shared_bytes) {
    ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor);
    NEED_INIT();
    if (!blocks || !f || block_threads <= 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!kernel_of_function(f)) RETURN(CUDA_ERROR_INVALID_HANDLE);
    const char *env = getenv("FAKE_CUDA_OCCUPANCY");
    int n = block_threads > 1024 ? 0 : 2048 / block_threads;
    if (n > 32) n = 32;
    if (shared_bytes && (size_t)n * shared_bytes > 228u * 1024u) n = (int)(228u * 1024u / shared_bytes);
    *blocks = env && *env ? atoi(env) : n;
    RETURN(CUDA_SUCCESS);
}

/* Only CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, up to 227 KiB. */
FAKE_API CUresult cuFuncSetAttribute(CUfunction f, int attrib, int value) {
    ENTER(cuFuncSetAttribute);
    NEED_INIT();
    if (!f || attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 || value > 227 * 1024)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!kernel_of_function(f)) RETURN(CUDA_ERROR_INVALID_HANDLE);
    RETURN(CUDA_SUCCESS);
}

/* Only CU_FUNC_ATTRIBUTE_PTX_VERSION: 90 (the code a 9.0 GPU would run),
 * or $FAKE_CUDA_PTX_VERSION. */
FAKE_API CUresult cuFuncGetAttribute(int *value, int attrib, CUfunction f) {
    ENTER(cuFuncGetAttribute);
    NEED_INIT();
    if (!value || !f || attrib != CU_FUNC_ATTRIBUTE_PTX_VERSION) RETURN(CUDA_ERROR_INVALID_VALUE);
    const char *env = getenv("FAKE_CUDA_PTX_VERSION");
    *value = env && *env ? atoi(env) : 90;
    RETURN(CUDA_SUCCESS);
}

/* Parameters from the kernel's name: "name#8,4,8" (see the top comment). */
FAKE_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t index, size_t *offset, size_t *size) {
    ENTER(cuKernelGetParamInfo);
    NEED_INIT();
    struct CUkern_st *k = kernel_of(kernel);
    if (!k) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!offset) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(param_of_name(k->name, index, offset, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* A kernel's function's name ("library" feature). */
FAKE_API CUresult cuFuncGetName(const char **name, CUfunction f) {
    ENTER(cuFuncGetName);
    NEED_INIT();
    struct CUkern_st *k = f ? kernel_of_function(f) : NULL;
    if (!k) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!name) RETURN(CUDA_ERROR_INVALID_VALUE);
    *name = k->name;
    RETURN(CUDA_SUCCESS);
}

/* cuKernelGetParamInfo for a kernel's function ("library" feature). */
FAKE_API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset, size_t *size) {
    ENTER(cuFuncGetParamInfo);
    NEED_INIT();
    struct CUkern_st *k = f ? kernel_of_function(f) : NULL;
    if (!k) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!offset) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(param_of_name(k->name, index, offset, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* ---- green contexts -------------------------------------------------------
 * The SM resource and the split (132 SMs, partitions of at least 8 in
 * multiples of 8, at most 16 groups), enough for cuweave's validation of
 * partition sizes. cuDevResourceGenerateDesc first checks the resources it
 * is given, as the real driver reads them: `count` entries that lie within
 * the result array of the last split with a result
 * (cuDevSmResourceSplitByCount: the array's address and the groups it made
 * are remembered), or that split's `remaining` with a count of 1. Anything
 * else would read past the caller's array: it is not read, the call returns
 * CUDA_ERROR_INVALID_VALUE and counts in fake_cuda_live("badresource").
 *
 * Making green contexts is off by default: cuDevResourceGenerateDesc then
 * reports CUDA_ERROR_NOT_SUPPORTED after its checks. fake_cuda_green(1)
 * turns it on: a descriptor carries its SM count; cuGreenCtxCreate makes a
 * green context with a CUcontext of its own (cuCtxFromGreenCtx; of the
 * device, with its own legacy stream, usable with cuCtxSetCurrent like any
 * context, no peer access), cuGreenCtxGetDevResource gives its SMs,
 * cuGreenCtxStreamCreate makes a stream of it (CU_STREAM_NON_BLOCKING only,
 * as the real driver), cuGreenCtxDestroy destroys it: its streams and
 * events still alive count as orphans (fake_cuda_live("orphans")), as for a
 * primary context's last release, and it is no longer a live context.
 * fake_cuda_live("green") counts the green contexts alive. A destroyed
 * green context's memory is kept (on a list) so that a stale CUcontext is
 * refused, never read. */

struct CUgreenCtx_st {
    uint32_t magic;
    int alive;
    unsigned sms;
    struct CUctx_st ctx;           /* what cuCtxFromGreenCtx gives */
    struct CUstream_st legacy;     /* the context's legacy stream */
    struct CUgreenCtx_st *next;    /* every green context ever made */
};
#define MAGIC_GREEN 0x47524e46u

static struct CUgreenCtx_st *g_greens;
static int g_green_on;
static long g_live_green;

/* The green context whose CUcontext c is (alive or not), or NULL. Never
 * dereferences c. Lock held. */
static struct CUgreenCtx_st *green_of_ctx(CUcontext c) {
    for (struct CUgreenCtx_st *g = g_greens; g; g = g->next)
        if (&g->ctx == c) return g;
    return NULL;
}

static int green_alive(const struct CUgreenCtx_st *g) { return g && g->alive; }

static struct CUgreenCtx_st *green_of(CUgreenCtx h) {
    for (struct CUgreenCtx_st *g = g_greens; g; g = g->next)
        if (g == (struct CUgreenCtx_st *)h) return g->alive ? g : NULL;
    return NULL;
}

/* Descriptors carry their SM count in the handle's value (the driver owns
 * descriptors and has no call to free them). */
#define DESC_TAG 0x5u
static CUdevResourceDesc desc_make(unsigned sms) { return (CUdevResourceDesc)(uintptr_t)(((uintptr_t)sms << 4) | DESC_TAG); }
static int desc_sms(CUdevResourceDesc d, unsigned *sms) {
    uintptr_t v = (uintptr_t)d;
    if ((v & 0xfu) != DESC_TAG || (v >> 4) == 0) return 0;
    *sms = (unsigned)(v >> 4);
    return 1;
}

static const CUdevResource *g_split_result, *g_split_remaining;
static unsigned g_split_groups;
static long g_bad_resource;

FAKE_API CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type) {
    if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!res || type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_VALUE;
    memset(res, 0, sizeof *res);
    res->type = CU_DEV_RESOURCE_TYPE_SM;
    res->sm.smCount = 132;
    res->sm.minSmPartitionSize = 8;
    res->sm.smCoscheduledAlignment = 8;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned *groups, const CUdevResource *input,
                                              CUdevResource *remaining, unsigned flags, unsigned min_count) {
    (void)flags;
    ENTER(cuDevSmResourceSplitByCount);
    if (!groups || !input || input->type != CU_DEV_RESOURCE_TYPE_SM || min_count == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    unsigned unit = (min_count + 7) / 8 * 8;
    unsigned possible = input->sm.smCount / unit;
    if (!result) {
        *groups = possible;
        RETURN(CUDA_SUCCESS);
    }
    unsigned n = *groups < possible ? *groups : possible;
    for (unsigned i = 0; i < n; i++) {
        memset(&result[i], 0, sizeof result[i]);
        result[i].type = CU_DEV_RESOURCE_TYPE_SM;
        result[i].sm.smCount = unit;
        result[i].sm.minSmPartitionSize = 8;
        result[i].sm.smCoscheduledAlignment = 8;
    }
    if (remaining) {
        memset(remaining, 0, sizeof *remaining);
        remaining->type = CU_DEV_RESOURCE_TYPE_SM;
        remaining->sm.smCount = input->sm.smCount - n * unit;
    }
    *groups = n;
    g_split_result = result;
    g_split_groups = n;
    g_split_remaining = remaining;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *resources, unsigned count) {
    ENTER(cuDevResourceGenerateDesc);
    const uintptr_t at = (uintptr_t)resources, base = (uintptr_t)g_split_result;
    const int in_result = g_split_result && count > 0 && at >= base && (at - base) % sizeof(CUdevResource) == 0 &&
                          (at - base) / sizeof(CUdevResource) + count <= g_split_groups;
    const int is_remaining = g_split_remaining && resources == g_split_remaining && count == 1;
    if (!in_result && !is_remaining) {
        g_bad_resource++;
        RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    if (!g_green_on) RETURN(CUDA_ERROR_NOT_SUPPORTED);
    if (!desc) RETURN(CUDA_ERROR_INVALID_VALUE);
    unsigned sms = 0;
    for (unsigned i = 0; i < count; i++) sms += resources[i].sm.smCount;
    if (sms == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    *desc = desc_make(sms);
    RETURN(CUDA_SUCCESS);
}
FAKE_API CUresult cuGreenCtxCreate(CUgreenCtx *green, CUdevResourceDesc desc, CUdevice dev, unsigned flags) {
    ENTER(cuGreenCtxCreate);
    NEED_INIT();
    unsigned sms = 0;
    if (!green || !desc_sms(desc, &sms) || flags != CU_GREEN_CTX_DEFAULT_STREAM) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!dev_ok(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (!g_green_on) RETURN(CUDA_ERROR_NOT_SUPPORTED);
    struct CUgreenCtx_st *g = (struct CUgreenCtx_st *)calloc(1, sizeof *g);
    if (!g) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    g->magic = MAGIC_GREEN;
    g->alive = 1;
    g->sms = sms;
    g->legacy.magic = MAGIC_STREAM;
    g->legacy.is_legacy = 1;
    g->ctx.magic = MAGIC_CTX;
    g->ctx.is_primary = 0;
    g->ctx.legacy = &g->legacy;
    g->ctx.dev = dev;
    g->legacy.ctx = &g->ctx;
    g->next = g_greens;
    g_greens = g;
    g_live_green++;
    *green = (CUgreenCtx)g;
    RETURN(CUDA_SUCCESS);
}
FAKE_API CUresult cuGreenCtxDestroy(CUgreenCtx green) {
    ENTER(cuGreenCtxDestroy);
    NEED_INIT();
    struct CUgreenCtx_st *g = green_of(green);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    /* As the real driver, everything made on it goes with it. */
    for (struct CUstream_st *s = g_streams; s; s = s->next_live)
        if (s->ctx == &g->ctx) g_orphans++;
    for (struct CUevent_st *e = g_events; e; e = e->next_live)
        if (e->ctx == &g->ctx) g_orphans++;
    g->alive = 0;
    g_live_green--;
    RETURN(CUDA_SUCCESS);
}
FAKE_API CUresult cuCtxFromGreenCtx(CUcontext *ctx, CUgreenCtx green) {
    ENTER(cuCtxFromGreenCtx);
    NEED_INIT();
    struct CUgreenCtx_st *g = green_of(green);
    if (!ctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    *ctx = &g->ctx;
    RETURN(CUDA_SUCCESS);
}
FAKE_API CUresult cuGreenCtxGetDevResource(CUgreenCtx green, CUdevResource *res, CUdevResourceType type) {
    ENTER(cuGreenCtxGetDevResource);
    NEED_INIT();
    struct CUgreenCtx_st *g = green_of(green);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!res || type != CU_DEV_RESOURCE_TYPE_SM) RETURN(CUDA_ERROR_INVALID_VALUE);
    memset(res, 0, sizeof *res);
    res->type = CU_DEV_RESOURCE_TYPE_SM;
    res->sm.smCount = g->sms;
    res->sm.minSmPartitionSize = 8;
    res->sm.smCoscheduledAlignment = 8;
    RETURN(CUDA_SUCCESS);
}
FAKE_API CUresult cuGreenCtxStreamCreate(CUstream *stream, CUgreenCtx green, unsigned flags, int priority) {
    ENTER(cuGreenCtxStreamCreate);
    NEED_INIT();
    struct CUgreenCtx_st *g = green_of(green);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!stream || flags != CU_STREAM_NON_BLOCKING) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUstream_st *s = (struct CUstream_st *)calloc(1, sizeof *s);
    if (!s) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    s->magic = MAGIC_STREAM;
    s->ctx = &g->ctx;
    s->flags = flags;
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    s->next_live = g_streams;
    g_streams = s;
    g_live_streams++;
    *stream = s;
    RETURN(CUDA_SUCCESS);
}

/* ---- graphs ---------------------------------------------------------------- */

static CUresult begin_capture(CUstream stream, struct CUgraph_st *into, const CUgraphNode *deps, size_t ndeps,
                              CUstreamCaptureMode mode) {
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) return err;
    if (s->is_legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (mode < 0 || mode > 2) return CUDA_ERROR_INVALID_VALUE;
    if (s->cap) return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = into;
    if (!g && !(g = graph_new(GRAPH_TOP))) return CUDA_ERROR_OUT_OF_MEMORY;
    if (g->capturing) return CUDA_ERROR_INVALID_VALUE;
    g->capturing = 1;
    g->invalidated = 0;
    s->cap = g;
    s->cap_origin = 1;
    s->cap_own_graph = into == NULL;
    s->cap_mode = mode;
    s->cap_thread = pthread_self();
    s->cdeps.n = 0;
    s->node_gen = 0;
    s->joined = 0;
    for (size_t i = 0; i < ndeps; i++) deps_add(&s->cdeps, (struct CUgraphNode_st *)deps[i]);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
    ENTER(cuStreamBeginCapture);
    NEED_INIT();
    RETURN(begin_capture(stream, NULL, NULL, 0, mode));
}

FAKE_API CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode *deps,
                                              const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode) {
    (void)edges;
    ENTER(cuStreamBeginCaptureToGraph);
    NEED_INIT();
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    for (size_t i = 0; i < ndeps; i++)
        if (!node_in(g, (struct CUgraphNode_st *)deps[i])) RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(begin_capture(stream, g, deps, ndeps, mode));
}

FAKE_API CUresult cuStreamEndCapture(CUstream stream, CUgraph *out) {
    ENTER(cuStreamEndCapture);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (!out) RETURN(CUDA_ERROR_INVALID_VALUE);
    *out = NULL;
    if (!s->cap) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!s->cap_origin) RETURN(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    if (s->cap_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && !pthread_equal(s->cap_thread, pthread_self()))
        RETURN(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    struct CUgraph_st *g = s->cap;
    int own = s->cap_own_graph;
    CUresult r = CUDA_SUCCESS;
    if (g->invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        for (struct CUstream_st *o = g_streams; o; o = o->next_live)
            if (o != s && o->cap == g && !o->joined) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
    capture_clear_locked(g);
    if (r != CUDA_SUCCESS) {
        if (own) graph_free(g);
        RETURN(r);
    }
    *out = g;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status) {
    ENTER(cuStreamIsCapturing);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (!status) RETURN(CUDA_ERROR_INVALID_VALUE);
    *status = !s->cap ? CU_STREAM_CAPTURE_STATUS_NONE
              : s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                    : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphCreate(CUgraph *graph, unsigned flags) {
    ENTER(cuGraphCreate);
    NEED_INIT();
    if (!graph || flags) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUgraph_st *g = graph_new(GRAPH_TOP);
    if (!g) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *graph = g;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphDestroy(CUgraph graph) {
    ENTER(cuGraphDestroy);
    NEED_INIT();
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (g->kind == GRAPH_BODY) RETURN(CUDA_ERROR_INVALID_VALUE); /* owned by its conditional node */
    graph_free(g);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count) {
    ENTER(cuGraphGetNodes);
    NEED_INIT();
    struct CUgraph_st *g = graph_or_clone_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!count) RETURN(CUDA_ERROR_INVALID_VALUE);
    /* The H100's driver (580) refuses an array with room for no node. */
    if (nodes && *count == 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (nodes)
        for (size_t i = 0; i < *count && i < g->count; i++) nodes[i] = g->nodes[i];
    *count = g->count;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode *dependents, size_t *count) {
    ENTER(cuGraphNodeGetDependentNodes);
    NEED_INIT();
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)node;
    if (!n || n->magic != MAGIC_NODE || !count || dependents) RETURN(CUDA_ERROR_INVALID_VALUE);
    *count = (size_t)n->dependents;
    RETURN(CUDA_SUCCESS);
}

/* ---- node types and edges (edge data: the "conditional" feature's 12.3 API) ---- */

static int node_type(const struct CUgraphNode_st *n) {
    if (n->is_cond) return CU_GRAPH_NODE_TYPE_CONDITIONAL;
    if (n->child) return CU_GRAPH_NODE_TYPE_GRAPH;
    if (!n->item) return CU_GRAPH_NODE_TYPE_EMPTY;
    switch (n->item->kind) {
    case IT_KERNEL: return CU_GRAPH_NODE_TYPE_KERNEL;
    case IT_COPY: return CU_GRAPH_NODE_TYPE_MEMCPY;
    case IT_MEMSET32: return CU_GRAPH_NODE_TYPE_MEMSET;
    case IT_HOSTFN: return CU_GRAPH_NODE_TYPE_HOST;
    case IT_RECORD: return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    case IT_WRITE32: case IT_WRITE64: case IT_WAIT32: return CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    default: return CU_GRAPH_NODE_TYPE_EMPTY;
    }
}

static int deps_has(const struct deps *d, const struct CUgraphNode_st *n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->v[i] == n) return 1;
    return 0;
}

static void deps_remove(struct deps *d, const struct CUgraphNode_st *n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->v[i] == n) {
            d->v[i] = d->v[--d->n];
            return;
        }
}

FAKE_API CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
    ENTER(cuGraphNodeGetType);
    NEED_INIT();
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)node;
    if (!n || n->magic != MAGIC_NODE || !type) RETURN(CUDA_ERROR_INVALID_VALUE);
    *type = (CUgraphNodeType)node_type(n);
    RETURN(CUDA_SUCCESS);
}

/* A captured kernel node: its function and its arguments (as the kernel's
 * name lays them out), pointed into the node's own copy. */
FAKE_API CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v2 *params) {
    ENTER(cuGraphKernelNodeGetParams);
    NEED_INIT();
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)node;
    if (!n || n->magic != MAGIC_NODE || !params || !n->item || n->item->kind != IT_KERNEL)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    memset(params, 0, sizeof *params);
    params->func = n->item->func;
    params->gridDimX = params->gridDimY = params->gridDimZ = 1;
    params->blockDimX = params->blockDimY = params->blockDimZ = 1;
    for (unsigned i = 0; i < n->item->nparams; i++) n->argp[i] = n->item->args + n->item->param_off[i];
    params->kernelParams = n->item->nparams ? n->argp : NULL;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *graph) {
    ENTER(cuGraphChildGraphNodeGetGraph);
    NEED_INIT();
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)node;
    if (!n || n->magic != MAGIC_NODE || !graph || !n->child) RETURN(CUDA_ERROR_INVALID_VALUE);
    *graph = n->child;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode *deps, CUgraphEdgeData *edges,
                                             size_t *count) {
    ENTER(cuGraphNodeGetDependencies);
    NEED_INIT();
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)node;
    if (!n || n->magic != MAGIC_NODE || !count || (edges && !deps)) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (deps)
        for (size_t i = 0; i < *count && i < n->deps.n; i++) {
            deps[i] = n->deps.v[i];
            if (edges) {
                memset(&edges[i], 0, sizeof edges[i]);
                if (deps_has(&n->prog, n->deps.v[i])) {
                    edges[i].type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
                    edges[i].from_port = CW_KERNEL_NODE_PORT_LAUNCH_ORDER;
                }
            }
        }
    *count = n->deps.n;
    RETURN(CUDA_SUCCESS);
}

/* Checks an edge list against graph g: both ends in it; a programmatic
 * edge only between kernel nodes, from a kernel port (as the driver). */
static CUresult edges_check(struct CUgraph_st *g, const CUgraphNode *from, const CUgraphNode *to,
                            const CUgraphEdgeData *edges, size_t count) {
    if (!from || !to) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        struct CUgraphNode_st *a = (struct CUgraphNode_st *)from[i], *b = (struct CUgraphNode_st *)to[i];
        if (!node_in(g, a) || !node_in(g, b) || a == b) return CUDA_ERROR_INVALID_VALUE;
        if (edges && edges[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC &&
            (node_type(a) != CU_GRAPH_NODE_TYPE_KERNEL || node_type(b) != CU_GRAPH_NODE_TYPE_KERNEL ||
             edges[i].from_port == 0))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphAddDependencies(CUgraph graph, const CUgraphNode *from, const CUgraphNode *to,
                                         const CUgraphEdgeData *edges, size_t count) {
    ENTER(cuGraphAddDependencies);
    NEED_INIT();
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    CUresult r = edges_check(g, from, to, edges, count);
    if (r != CUDA_SUCCESS) RETURN(r);
    for (size_t i = 0; i < count; i++) {
        struct CUgraphNode_st *a = (struct CUgraphNode_st *)from[i], *b = (struct CUgraphNode_st *)to[i];
        if (deps_has(&b->deps, a)) RETURN(CUDA_ERROR_INVALID_VALUE); /* the driver refuses a duplicate */
        if (!deps_add(&b->deps, a)) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        a->dependents++;
        if (edges && edges[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC && !deps_add(&b->prog, a))
            RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphRemoveDependencies(CUgraph graph, const CUgraphNode *from, const CUgraphNode *to,
                                            const CUgraphEdgeData *edges, size_t count) {
    ENTER(cuGraphRemoveDependencies);
    NEED_INIT();
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    CUresult r = edges_check(g, from, to, NULL, count);
    if (r != CUDA_SUCCESS) RETURN(r);
    for (size_t i = 0; i < count; i++) {
        struct CUgraphNode_st *a = (struct CUgraphNode_st *)from[i], *b = (struct CUgraphNode_st *)to[i];
        /* the edge data must match the edge's (the driver matches on it) */
        const int prog = deps_has(&b->prog, a);
        const int want = edges && edges[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
        if (!deps_has(&b->deps, a) || prog != want) RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    for (size_t i = 0; i < count; i++) {
        struct CUgraphNode_st *a = (struct CUgraphNode_st *)from[i], *b = (struct CUgraphNode_st *)to[i];
        deps_remove(&b->deps, a);
        deps_remove(&b->prog, a);
        a->dependents--;
    }
    RETURN(CUDA_SUCCESS);
}

static CUresult add_node(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                         struct CUgraph_st *child) {
    struct CUgraph_st *g = graph_of(graph);
    if (!g || !node) return !g ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    if (g->capturing) return CUDA_ERROR_INVALID_VALUE;
    struct deps d = {0};
    for (size_t i = 0; i < ndeps; i++) {
        if (!node_in(g, (struct CUgraphNode_st *)deps[i])) {
            deps_free(&d);
            return CUDA_ERROR_INVALID_VALUE;
        }
        deps_add(&d, (struct CUgraphNode_st *)deps[i]);
    }
    if (child && graph_has_cond(child)) {
        deps_free(&d);
        return CUDA_ERROR_NOT_SUPPORTED; /* as the real driver */
    }
    struct CUgraph_st *clone = NULL;
    if (child && !(clone = graph_clone(child))) {
        deps_free(&d);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUgraphNode_st *n = node_add(g, &d);
    deps_free(&d);
    if (!n) {
        if (clone) graph_free(clone);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->child = clone;
    *node = n;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                           CUgraph child) {
    ENTER(cuGraphAddChildGraphNode);
    NEED_INIT();
    struct CUgraph_st *c = graph_of(child);
    if (!c) RETURN(CUDA_ERROR_INVALID_HANDLE);
    RETURN(add_node(node, graph, deps, ndeps, c));
}

FAKE_API CUresult cuGraphAddEmptyNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps) {
    ENTER(cuGraphAddEmptyNode);
    NEED_INIT();
    RETURN(add_node(node, graph, deps, ndeps, NULL));
}

/* A kernel node made by hand: a node whose item is a kernel launch of
 * params->func with a copy of its arguments (as the kernel's name lays them
 * out), as a captured launch would be. */
FAKE_API CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                       const CUDA_KERNEL_NODE_PARAMS_v2 *params) {
    ENTER(cuGraphAddKernelNode);
    NEED_INIT();
    struct CUkern_st *k = params && params->func ? kernel_of_function(params->func) : NULL;
    if (!k) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct item *it = new_item(IT_KERNEL, NULL);
    if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    it->user = k;
    it->func = params->func;
    size_t off = 0, size = 0;
    for (unsigned i = 0; i < 16 && params->kernelParams && param_of_name(k->name, i, &off, &size) &&
                         off + size <= sizeof it->args;
         i++) {
        memcpy(it->args + off, params->kernelParams[i], size);
        it->param_off[i] = (unsigned short)off;
        it->nparams = i + 1;
    }
    CUresult r = add_node(node, graph, deps, ndeps, NULL);
    if (r != CUDA_SUCCESS) {
        free(it);
        RETURN(r);
    }
    ((struct CUgraphNode_st *)*node)->item = it;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
    ENTER(cuGraphKernelNodeCopyAttributes);
    NEED_INIT();
    const struct CUgraphNode_st *d = (const struct CUgraphNode_st *)dst, *s = (const struct CUgraphNode_st *)src;
    if (!d || !s || d->magic != MAGIC_NODE || s->magic != MAGIC_NODE || !d->item || !s->item ||
        d->item->kind != IT_KERNEL || s->item->kind != IT_KERNEL)
        RETURN(CUDA_ERROR_INVALID_VALUE);
    RETURN(CUDA_SUCCESS); /* the fake keeps no attributes */
}

/* The fake keeps one attribute: a kernel node's cooperative flag (counted
 * by fake_cuda_cooperative_nodes). */
static long g_cooperative_nodes;
FAKE_API CUresult cuGraphKernelNodeSetAttribute(CUgraphNode node, CUlaunchAttributeID attr,
                                                const CUlaunchAttributeValue *value) {
    ENTER(cuGraphKernelNodeSetAttribute);
    NEED_INIT();
    struct CUgraphNode_st *n = (struct CUgraphNode_st *)node;
    if (!n || !value || n->magic != MAGIC_NODE || !n->item || n->item->kind != IT_KERNEL) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
        if (value->cooperative && !n->cooperative) g_cooperative_nodes++;
        n->cooperative = value->cooperative != 0;
    }
    RETURN(CUDA_SUCCESS);
}

/* Kernel nodes made cooperative so far (the attribute set to nonzero). */
FAKE_API long fake_cuda_cooperative_nodes(void) { return g_cooperative_nodes; }

FAKE_API CUresult cuGraphDebugDotPrint(CUgraph graph, const char *path, unsigned flags) {
    (void)flags;
    ENTER(cuGraphDebugDotPrint);
    NEED_INIT();
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) RETURN(CUDA_ERROR_INVALID_VALUE);
    fprintf(f, "digraph fake {\n");
    for (size_t i = 0; i < g->count; i++) fprintf(f, "  n%zu;\n", i);
    fprintf(f, "}\n");
    fclose(f);
    RETURN(CUDA_SUCCESS);
}

/* Programmatic edges in g, its bodies and child graphs. */
static long count_prog(const struct CUgraph_st *g) {
    long n = 0;
    for (size_t i = 0; i < g->count; i++) {
        const struct CUgraphNode_st *x = g->nodes[i];
        n += (long)x->prog.n;
        if (x->child) n += count_prog(x->child);
        for (unsigned b = 0; b < x->nbodies; b++)
            if (x->bodies[b]) n += count_prog((const struct CUgraph_st *)x->bodies[b]);
    }
    return n;
}
static long g_last_prog_edges = -1;

FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    ENTER(cuGraphInstantiateWithFlags);
    NEED_INIT();
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    g_last_prog_edges = count_prog(g);
    if (!exec || (flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!current_ctx()) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct CUgraphExec_st *e = (struct CUgraphExec_st *)calloc(1, sizeof *e);
    if (!e) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    size_t cap = 0;
    if (!flatten(g, &e->items, &e->count, &cap)) {
        exec_items_free(e->items, e->count);
        free(e);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    e->magic = MAGIC_EXEC;
    e->cond_shape = cond_shape(g);
    e->pers_cond = graph_has_cond(g);
    for (size_t i = 0; i < g->count; i++)
        if (g->nodes[i]->is_cond && g->nodes[i]->cond_type == CU_GRAPH_COND_TYPE_WHILE) e->pers_loop = 1;
    e->next_live = g_execs;
    g_execs = e;
    g_live_execs++;
    *exec = e;
    RETURN(CUDA_SUCCESS);
}

static struct CUgraphExec_st *exec_of(CUgraphExec h) {
    for (struct CUgraphExec_st *e = g_execs; e; e = e->next_live)
        if (e == (struct CUgraphExec_st *)h) return e;
    return NULL;
}

FAKE_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
    ENTER(cuGraphExecDestroy);
    NEED_INIT();
    const struct CUgraphExec_st *x = exec_of(exec);
    if (x && x->pers_cond) pers_check_locked("cuGraphExecDestroy", NULL);
    struct CUgraphExec_st **pp = &g_execs;
    while (*pp && *pp != (struct CUgraphExec_st *)exec) pp = &(*pp)->next_live;
    if (!*pp) RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct CUgraphExec_st *e = *pp;
    *pp = e->next_live;
    g_live_execs--;
    exec_items_free(e->items, e->count);
    e->magic = 0;
    free(e);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) {
    ENTER(cuGraphUpload);
    NEED_INIT();
    CUresult err = CUDA_SUCCESS;
    if (!exec_of(exec)) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!stream_of(stream, &err)) RETURN(err);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    obs_enter("cuGraphLaunch");
    ENTER(cuGraphLaunch);
    NEED_INIT();
    struct CUgraphExec_st *e = exec_of(exec);
    if (!e) RETURN(CUDA_ERROR_INVALID_HANDLE);
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(stream, &err);
    if (!s) RETURN(err);
    if (s->cap) RETURN(CUDA_ERROR_NOT_SUPPORTED); /* not modelled */
    const unsigned corr = t_obs_corr;
    t_obs_corr = 0;
    for (size_t i = 0; i < e->count; i++) {
        struct item *it = (struct item *)malloc(sizeof *it);
        if (!it) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        *it = *e->items[i];
        it->next = NULL;
        it->stream = s;
        it->corr = it->kind == IT_KERNEL || it->kind == IT_COPY || it->kind == IT_MEMSET32 ? corr : 0u;
        CUresult r = submit_locked(it);
        if (r != CUDA_SUCCESS) RETURN(r);
    }
    if (e->pers_loop) pers_mark_locked(s);
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info) {
    ENTER(cuGraphExecUpdate);
    NEED_INIT();
    struct CUgraphExec_st *e = exec_of(exec);
    struct CUgraph_st *g = graph_of(graph);
    if (!e || !g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!info) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct item **v = NULL;
    size_t n = 0, cap = 0;
    if (!flatten(g, &v, &n, &cap)) {
        exec_items_free(v, n);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    memset(info, 0, sizeof *info);
    if (n != e->count || cond_shape(g) != e->cond_shape) info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < n && !info->result; i++)
        if (v[i]->kind != e->items[i]->kind) info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    if (info->result) {
        exec_items_free(v, n);
        RETURN(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    }
    exec_items_free(e->items, e->count);
    e->items = v;
    RETURN(CUDA_SUCCESS);
}

/* ---- conditional nodes ("conditional" feature) ---------------------------- */

static CUgraphConditionalHandle g_next_cond_handle = 1;

FAKE_API CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *handle, CUgraph graph, CUcontext ctx,
                                                 unsigned default_value, unsigned flags) {
    (void)default_value;
    ENTER(cuGraphConditionalHandleCreate);
    NEED_INIT();
    if (!handle || !graph || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_alive(ctx)) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (g->nconds == g->capconds) {
        size_t cap = g->capconds ? g->capconds * 2 : 4;
        void *p = realloc(g->conds, cap * sizeof *g->conds);
        if (!p) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        g->conds = (struct cond_handle *)p;
        g->capconds = cap;
    }
    g->conds[g->nconds].handle = g_next_cond_handle++;
    g->conds[g->nconds].ctx = ctx;
    *handle = g->conds[g->nconds++].handle;
    RETURN(CUDA_SUCCESS);
}

FAKE_API CUresult cuGraphAddNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                 const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeParams *params) {
    (void)edges; /* edge data is not modelled: default edges */
    ENTER(cuGraphAddNode);
    NEED_INIT();
    if (!node || !graph || !params || (ndeps && !deps)) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUgraph_st *g = graph_of(graph);
    if (!g) RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (params->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) RETURN(CUDA_ERROR_NOT_SUPPORTED); /* not modelled */
    CUDA_CONDITIONAL_NODE_PARAMS *c = &params->conditional;
    const struct cond_handle *h = NULL;
    for (size_t i = 0; i < g->nconds && !h; i++)
        if (g->conds[i].handle == c->handle) h = &g->conds[i];
    if (!h) RETURN(CUDA_ERROR_INVALID_VALUE); /* not made on this graph */
    if (!c->ctx || c->ctx != h->ctx) RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!(c->type == CU_GRAPH_COND_TYPE_IF && (c->size == 1 || c->size == 2)) &&
        !(c->type == CU_GRAPH_COND_TYPE_WHILE && c->size == 1))
        RETURN(CUDA_ERROR_INVALID_VALUE);
    if (g->capturing) RETURN(CUDA_ERROR_INVALID_VALUE);
    struct deps d = {0};
    for (size_t i = 0; i < ndeps; i++) {
        CUresult r = !node_in(g, (struct CUgraphNode_st *)deps[i])        ? CUDA_ERROR_INVALID_VALUE
                     : !deps_add(&d, (struct CUgraphNode_st *)deps[i]) ? CUDA_ERROR_OUT_OF_MEMORY
                                                                        : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) {
            deps_free(&d);
            RETURN(r);
        }
    }
    struct CUgraph_st *bodies[2] = {NULL, NULL};
    for (unsigned i = 0; i < c->size; i++)
        if (!(bodies[i] = graph_new(GRAPH_BODY))) {
            if (bodies[0]) graph_free(bodies[0]);
            deps_free(&d);
            RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        }
    struct CUgraphNode_st *n = node_add(g, &d);
    deps_free(&d);
    if (!n) {
        for (unsigned i = 0; i < c->size; i++) graph_free(bodies[i]);
        RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    n->is_cond = 1;
    n->cond_type = c->type;
    n->nbodies = c->size;
    for (unsigned i = 0; i < c->size; i++) n->bodies[i] = bodies[i];
    c->phGraph_out = n->bodies; /* the node's own array, valid while the node lives (as the driver's) */
    *node = n;
    RETURN(CUDA_SUCCESS);
}

/* ---- persistent launches (issue 38; see the top) -------------------------- */

#define PERS_MAX 64
static const struct CUstream_st *g_pers[PERS_MAX]; /* streams marked running persistent work */
static long g_pers_violations;
static char g_pers_last[128];

static int g_pers_off; /* fake_cuda_persistent_watch(0) */

static void pers_mark_locked(struct CUstream_st *s) {
    if (g_pers_off) return;
    int free_slot = -1;
    for (int i = 0; i < PERS_MAX; i++) {
        if (g_pers[i] == s) return;
        if (!g_pers[i] && free_slot < 0) free_slot = i;
    }
    if (s && free_slot >= 0) g_pers[free_slot] = s;
}

static pthread_cond_t g_pers_cv = PTHREAD_COND_INITIALIZER; /* a mark cleared */

static void pers_clear_locked(const struct CUstream_st *s) {
    for (int i = 0; i < PERS_MAX; i++)
        if (s && g_pers[i] == s) {
            g_pers[i] = NULL;
            pthread_cond_broadcast(&g_pers_cv);
        }
}

/* A marked stream that a call waiting until no kernel runs on the device
 * waits for: one of the device of the calling thread's context (of any
 * device without one); with only set, one of that context. */
static const struct CUstream_st *pers_blocking_locked(CUcontext only) {
    const CUcontext cur = current_ctx();
    for (int i = 0; i < PERS_MAX; i++) {
        const struct CUstream_st *s = g_pers[i];
        if (!s || !s->ctx) continue;
        if (only ? s->ctx != only : cur && s->ctx->dev != cur->dev) continue;
        return s;
    }
    return NULL;
}

/* Such a call: waits up to 2 s for the marks it waits for to clear (the
 * lock is let go meanwhile: callers look their arguments up after), then
 * counts a violation when one is left. */
static void pers_check_locked(const char *entry, CUcontext only) {
    if (!pers_blocking_locked(only)) return;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    while (pers_blocking_locked(only))
        if (pthread_cond_timedwait(&g_pers_cv, &g_mu, &deadline) != 0) break;
    const struct CUstream_st *s = pers_blocking_locked(only);
    if (!s) return;
    g_pers_violations++;
    snprintf(g_pers_last, sizeof g_pers_last, "%s while a persistent launch ran on device %d", entry, s->ctx->dev);
}

/* off (0): marks nothing and forgets the marks set (for tests that fail
 * driver calls before they reach the fake, a cuStreamQuery that would have
 * cleared a mark among them); on (1, the default): marks again. */
FAKE_API void fake_cuda_persistent_watch(int on) {
    lock();
    g_pers_off = !on;
    if (!on) {
        for (int i = 0; i < PERS_MAX; i++) g_pers[i] = NULL;
        pthread_cond_broadcast(&g_pers_cv);
    }
    unlock();
}

/* Streams marked running persistent work now. */
FAKE_API long fake_cuda_persistent_running(void) {
    long n = 0;
    lock();
    for (int i = 0; i < PERS_MAX; i++) n += g_pers[i] != NULL;
    unlock();
    return n;
}

/* Calls made while persistent work ran that the real driver would have made
 * wait for it, since the process started; the last one described in last
 * (cap bytes; "" when none; last may be NULL). */
FAKE_API long fake_cuda_persistent_violations(char *last, size_t cap) {
    lock();
    const long n = g_pers_violations;
    if (last && cap) snprintf(last, cap, "%s", g_pers_last);
    unlock();
    return n;
}

/* ---- cuGetProcAddress ---------------------------------------------------- */

/* Optional features (FAKE_CUDA_FEATURES). */
enum { FEAT_CONDITIONAL = 1, FEAT_LIBRARY = 2 };
static unsigned g_features;
static pthread_once_t g_features_once = PTHREAD_ONCE_INIT;

static void features_read(void) {
    const char *env = getenv("FAKE_CUDA_FEATURES");
    if (!env) return;
    const char *p = env;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, ", \t");
        if (n == 0) break;
        if (n == 11 && !strncmp(p, "conditional", n))
            g_features |= FEAT_CONDITIONAL;
        else if (n == 7 && !strncmp(p, "library", n))
            g_features |= FEAT_LIBRARY;
        else if (n == 3 && !strncmp(p, "all", n))
            g_features |= FEAT_CONDITIONAL | FEAT_LIBRARY;
        else
            fprintf(stderr, "fake_cuda: FAKE_CUDA_FEATURES: unknown feature \"%.*s\" ignored\n", (int)n, p);
        p += n;
    }
}

static unsigned features(void) {
    pthread_once(&g_features_once, features_read);
    return g_features;
}

static const struct {
    const char *name;
    void *fn;
    unsigned feature; /* 0: always there; else found only with that feature on */
} g_procs[] = {
#define P_(name) {#name, (void *)name, 0},
#define PF_(name, feature) {#name, (void *)name, feature},
    P_(cuInit) P_(cuDriverGetVersion) P_(cuGetErrorName) P_(cuGetErrorString) P_(cuDeviceGetCount)
    P_(cuDeviceGet) P_(cuDeviceGetName) P_(cuDeviceGetAttribute) P_(cuDeviceTotalMem) P_(cuDeviceGetUuid)
    P_(cuDevicePrimaryCtxRetain) P_(cuDevicePrimaryCtxRelease) P_(cuDevicePrimaryCtxGetState)
    P_(cuCtxGetCurrent) P_(cuCtxSetCurrent) P_(cuCtxGetDevice) P_(cuCtxGetFlags) P_(cuCtxSynchronize)
    P_(cuCtxGetStreamPriorityRange) P_(cuCtxGetApiVersion) P_(cuStreamCreateWithPriority)
    P_(cuStreamDestroy) P_(cuStreamWaitEvent) P_(cuStreamSynchronize) P_(cuStreamQuery)
    P_(cuStreamGetPriority) P_(cuStreamGetFlags) P_(cuStreamGetCtx) P_(cuLaunchHostFunc)
    P_(cuStreamWriteValue32) P_(cuStreamWriteValue64) P_(cuStreamWaitValue32) P_(cuEventCreate)
    P_(cuEventRecord) P_(cuEventDestroy) P_(cuEventSynchronize) P_(cuEventQuery) P_(cuMemHostAlloc)
    P_(cuMemFreeHost) P_(cuMemHostGetDevicePointer) P_(cuMemAlloc) P_(cuMemFree) P_(cuMemcpyHtoD)
    P_(cuMemcpyDtoH) P_(cuMemcpyHtoDAsync) P_(cuMemcpyDtoHAsync) P_(cuMemsetD32Async)
    P_(cuModuleLoadData) P_(cuModuleUnload) P_(cuModuleGetFunction) P_(cuLaunchKernel)
    P_(cuEventElapsedTime) P_(cuStreamGetDevice) P_(cuDeviceGetDevResource) P_(cuDevSmResourceSplitByCount)
    P_(cuDevResourceGenerateDesc) P_(cuGreenCtxCreate) P_(cuGreenCtxDestroy) P_(cuCtxFromGreenCtx)
    P_(cuGreenCtxGetDevResource) P_(cuGreenCtxStreamCreate)
    P_(cuStreamBeginCapture) P_(cuStreamBeginCaptureToGraph) P_(cuStreamEndCapture) P_(cuStreamIsCapturing)
    P_(cuGraphCreate) P_(cuGraphDestroy) P_(cuGraphGetNodes) P_(cuGraphNodeGetDependentNodes)
    P_(cuGraphAddChildGraphNode) P_(cuGraphAddEmptyNode) P_(cuGraphDebugDotPrint) P_(cuGraphInstantiateWithFlags)
    P_(cuGraphExecDestroy) P_(cuGraphUpload) P_(cuGraphLaunch) P_(cuGraphExecUpdate)
    PF_(cuGraphConditionalHandleCreate, FEAT_CONDITIONAL) PF_(cuGraphAddNode, FEAT_CONDITIONAL)
    PF_(cuLibraryLoadData, FEAT_LIBRARY) PF_(cuLibraryUnload, FEAT_LIBRARY) PF_(cuLibraryGetKernel, FEAT_LIBRARY)
    PF_(cuKernelGetFunction, FEAT_LIBRARY) PF_(cuKernelGetParamInfo, FEAT_LIBRARY) PF_(cuFuncGetParamInfo, FEAT_LIBRARY) PF_(cuFuncGetName, FEAT_LIBRARY)
    P_(cuGraphKernelNodeGetParams) P_(cuGraphChildGraphNodeGetGraph) P_(cuGraphAddKernelNode)
    P_(cuGraphKernelNodeCopyAttributes) P_(cuGraphKernelNodeSetAttribute)
    PF_(cuLaunchKernelEx, FEAT_LIBRARY) P_(cuGraphNodeGetType) P_(cuFuncGetAttribute)
    P_(cuOccupancyMaxActiveBlocksPerMultiprocessor) P_(cuFuncSetAttribute)
    PF_(cuGraphNodeGetDependencies, FEAT_CONDITIONAL) PF_(cuGraphAddDependencies, FEAT_CONDITIONAL)
    PF_(cuGraphRemoveDependencies, FEAT_CONDITIONAL)
    P_(cuMemPoolCreate) P_(cuMemPoolDestroy) P_(cuMemPoolSetAttribute) P_(cuMemPoolGetAttribute)
    P_(cuMemAllocFromPoolAsync) P_(cuMemFreeAsync)
    P_(cuDeviceCanAccessPeer) P_(cuDeviceGetP2PAttribute) P_(cuCtxEnablePeerAccess) P_(cuMemcpyPeerAsync)
    P_(cuMemPoolSetAccess) P_(cuMemPoolGetAccess) P_(cuThreadExchangeStreamCaptureMode)
    P_(cuIpcGetMemHandle) P_(cuIpcOpenMemHandle) P_(cuIpcCloseMemHandle) P_(cuIpcGetEventHandle)
    P_(cuIpcOpenEventHandle) P_(cuMemGetAddressRange)
#undef PF_
#undef P_
};

FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, unsigned long long flags,
                                      int *symbolStatus) {
    (void)cudaVersion;
    (void)flags;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    unsigned on = features();
    const char *no_ipc = getenv("FAKE_CUDA_NO_IPC");
    int ipc_off = no_ipc && atoi(no_ipc) != 0;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++)
        if (strcmp(g_procs[i].name, symbol) == 0 && (g_procs[i].feature & ~on) == 0 &&
            !(ipc_off && strncmp(symbol, "cuIpc", 5) == 0)) {
            *pfn = g_procs[i].fn;
            if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

/* ---- control API for tests ---------------------------------------------- */

/* Live counts: "stream", "event", "hostmem", "devmem", "primary" (retain
 * count of device 0's primary context), "primary0" .. "primary3" (that of
 * device 0..3's; 0 for a device that FAKE_CUDA_DEVICES left out), "devices"
 * (the device count; 1 before cuInit), "peers" (enabled (context, peer)
 * pairs), "staged" / "direct" (cuMemcpyPeerAsync calls without / with peer
 * access between their contexts), "pending" (queued work items),
 * "graph" / "exec" (top-level graphs and executable graphs alive: a
 * conditional node's bodies are not in "graph" but in "body", the bodies
 * alive, which go with their top-level graph), "library" / "kernel"
 * (libraries loaded and kernels got from them, which go with their library),
 * "badaccess" (stream writes/copies to unallocated memory), "cbcalls"
 * (driver calls made from inside host functions), "orphans" (streams and
 * events still alive when their primary context's last retain went, or
 * their green context was destroyed), "green" (green contexts alive), "sticky"
 * (the sticky error, 0 if none), "badresource" (cuDevResourceGenerateDesc
 * calls given resources outside the last split's arrays), "syncblocking"
 * (cuEventSynchronize calls on events made with CU_EVENT_BLOCKING_SYNC, the
 * driver's sleeping wait), "syncwaiting" (threads waiting in
 * cuEventSynchronize now, for an event not yet complete). -1 for an unknown
 * kind. */
FAKE_API long fake_cuda_live(const char *kind) {
    long v = -1;
    if (!kind) return -1;
    lock();
    if (!strcmp(kind, "stream")) v = g_live_streams;
    else if (!strcmp(kind, "event")) v = g_live_events;
    else if (!strcmp(kind, "hostmem")) v = g_live_hostmem;
    else if (!strcmp(kind, "devmem")) v = g_live_devmem;
    else if (!strcmp(kind, "ipcmem")) v = g_live_ipcmem;
    else if (!strcmp(kind, "primary")) v = g_primary_refs[0];
    else if (!strncmp(kind, "primary", 7) && kind[7] >= '0' && kind[7] < '0' + FAKE_MAX_DEVICES && !kind[8])
        v = g_primary_refs[kind[7] - '0'];
    else if (!strcmp(kind, "devices")) v = g_ndev;
    else if (!strcmp(kind, "peers")) v = g_peers;
    else if (!strcmp(kind, "staged")) v = g_peer_staged;
    else if (!strcmp(kind, "direct")) v = g_peer_direct;
    else if (!strcmp(kind, "pending")) v = g_queued;
    else if (!strcmp(kind, "badaccess")) v = g_badaccess;
    else if (!strcmp(kind, "cbcalls")) v = g_cbcalls;
    else if (!strcmp(kind, "syncblocking")) v = g_sync_blocking;
    else if (!strcmp(kind, "syncwaiting")) v = g_sync_waiting;
    else if (!strcmp(kind, "orphans")) v = g_orphans;
    else if (!strcmp(kind, "sticky")) v = g_sticky;
    else if (!strcmp(kind, "graph")) v = g_live_graphs;
    else if (!strcmp(kind, "exec")) v = g_live_execs;
    else if (!strcmp(kind, "body")) v = g_live_bodies;
    else if (!strcmp(kind, "library")) v = g_live_libs;
    else if (!strcmp(kind, "kernel")) v = g_live_kernels;
    else if (!strcmp(kind, "mempool")) v = g_live_mempools;
    else if (!strcmp(kind, "badresource")) v = g_bad_resource;
    else if (!strcmp(kind, "green")) v = g_live_green;
    else if (!strcmp(kind, "hazards")) v = g_hazards;
    unlock();
    return v;
}

/* Hazards (see "hazards" above hb_entry): the count since the start; the
 * last one described into text (cap bytes, may be NULL). lost: the accesses
 * or orderings the fake could not note (out of memory: hazards may then be
 * missed). */
FAKE_API long fake_cuda_hazards(char *text, size_t cap, long *lost) {
    lock();
    long n = g_hazards;
    if (text && cap) snprintf(text, cap, "%s", g_hazard_text);
    if (lost) *lost = g_hb_lost;
    unlock();
    return n;
}

/* The unfinished accesses by stream-ordered work to the device allocation
 * holding dptr (0: none, all finished); -1 when dptr is in none. A buffer
 * handed out by a cache that promises "every use finished" must have 0. */
FAKE_API long fake_cuda_mem_busy(CUdeviceptr dptr) {
    lock();
    long n = -1;
    struct alloc *m = alloc_containing((void *)(uintptr_t)dptr, 1);
    if (m && !m->host) {
        n = 0;
        for (size_t i = 0; i < m->nacc; i++) n += m->acc[i].seq > g_hb_done;
    }
    unlock();
    return n;
}

/* on: enqueued work is held (not completed); off: everything held completes,
 * in order, on the callback thread (asynchronously: wait for it with a
 * stream/event/future wait, or fake_cuda_drain). */
FAKE_API void fake_cuda_hold(int on) {
    lock();
    g_hold = on != 0;
    if (!g_hold) pthread_cond_broadcast(&g_work_cv);
    unlock();
}

/* Blocks until no work is queued (or up to timeout_ms); 1 when drained. Must
 * not be called while held. */
FAKE_API int fake_cuda_drain(int timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    lock();
    int rc = 0;
    while (g_head && rc == 0) rc = pthread_cond_timedwait(&g_done_cv, &g_mu, &deadline);
    int drained = g_head == NULL;
    unlock();
    return drained;
}

/* Drops every queued work item that has not started, completing it without
 * its effect (host functions are not called, values not written). For tests
 * that must not let work left behind by a failed call run. Returns how many
 * of the dropped items would have touched host memory or called host code
 * (host functions, stream writes, copies, memsets); event records, waits and
 * no-ops are dropped without being counted. */
FAKE_API long fake_cuda_discard(void) {
    long n = 0;
    lock();
    struct item **pp = g_executing && g_head ? &g_head->next : &g_head;
    while (*pp) {
        struct item *it = *pp;
        *pp = it->next;
        g_queued--;
        if (it->kind == IT_HOSTFN || it->kind == IT_WRITE32 || it->kind == IT_WRITE64 || it->kind == IT_COPY ||
            it->kind == IT_MEMSET32)
            n++;
        complete_locked(it);
        free(it);
    }
    g_tail = NULL;
    for (struct item *it = g_head; it; it = it->next) g_tail = it;
    unlock();
    return n;
}

/* on: the next work item to complete faults (sticky ILLEGAL_ADDRESS, no
 * effect, nor for any later work). off: disarms and clears the sticky error. */
FAKE_API void fake_cuda_fault(int on) {
    lock();
    if (on) {
        g_fault_armed = 1;
    } else {
        g_fault_armed = 0;
        g_sticky = CUDA_SUCCESS;
    }
    pthread_cond_broadcast(&g_done_cv);
    unlock();
}

/* Number of successful cuStreamWaitEvent calls so far. */
FAKE_API long fake_cuda_waits(void) {
    lock();
    long v = g_waits;
    unlock();
    return v;
}

/* Number of calls of a driver entry ("cuEventRecord") so far, -1 if unknown; "*": of every entry. */
FAKE_API long fake_cuda_calls(const char *entry) {
    long v = -1;
    if (!entry) return -1;
    lock();
    if (!strcmp(entry, "*")) { /* every entry's calls together */
        v = 0;
        for (int i = 0; i < F_COUNT; i++) v += g_calls[i];
    }
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(g_entry_names[i], entry)) v = g_calls[i];
    unlock();
    return v;
}

/* The optional features turned on by FAKE_CUDA_FEATURES: bit 0 "conditional",
 * bit 1 "library" (reads the variable if no cuGetProcAddress_v2 call did). */
FAKE_API unsigned fake_cuda_features(void) { return features(); }

/* The last cuLaunchKernelEx: out[0] grid x, out[1] block x, out[2] dynamic
 * shared bytes, out[3] 1 when cooperative (CU_LAUNCH_ATTRIBUTE_COOPERATIVE),
 * out[4] the number of cuLaunchKernelEx calls that got that far. */
FAKE_API void fake_cuda_last_launch(unsigned out[5]) {
    pthread_mutex_lock(&g_mu);
    memcpy(out, g_last_launch, sizeof g_last_launch);
    pthread_mutex_unlock(&g_mu);
}

/* Programmatic edges in the graph last instantiated (-1: none yet). */
FAKE_API long fake_cuda_last_prog_edges(void) {
    lock();
    long n = g_last_prog_edges;
    unlock();
    return n;
}

/* on: green contexts can be made (see "green contexts" above); off (the
 * default): cuDevResourceGenerateDesc refuses with CUDA_ERROR_NOT_SUPPORTED. */
FAKE_API void fake_cuda_green(int on) {
    lock();
    g_green_on = on != 0;
    unlock();
}

/* A second context of device 0, always alive, not the primary one: what a
 * host program would have current. */
FAKE_API CUcontext fake_cuda_other_context(void) { return &g_other; }

/* on: cuEventQuery answers CUDA_ERROR_INVALID_CONTEXT unless the event's
 * context is current on the calling thread. */
FAKE_API void fake_cuda_event_query_needs_context(int on) {
    lock();
    g_event_query_needs_ctx = on;
    unlock();
}

/* Sets what cuCtxGetFlags says of a context (of the fake's own: a primary
 * context or the other one), e.g. CU_CTX_SCHED_BLOCKING_SYNC as FFmpeg's. */
FAKE_API void fake_cuda_set_context_flags(CUcontext ctx, unsigned flags) {
    lock();
    if (ctx && ctx_index(ctx) >= 0) ((struct CUctx_st *)ctx)->flags = flags;
    unlock();
}

/* The activity observer (see "the activity observer" above): api and done,
 * both NULL to remove them. */
FAKE_API void fake_cuda_observe(fake_obs_api_fn api, fake_obs_done_fn done, void *arg) {
    lock();
    __atomic_store_n(&g_obs_arg, arg, __ATOMIC_RELEASE);
    __atomic_store_n(&g_obs_done, done, __ATOMIC_RELEASE);
    __atomic_store_n(&g_obs_api, api, __ATOMIC_RELEASE);
    unlock();
}

/* A stream's id, unique in the process (the activity observer's), or 0 for
 * a handle that is no stream. */
FAKE_API unsigned long long fake_cuda_stream_id(CUstream h) {
    lock();
    CUresult err = CUDA_SUCCESS;
    struct CUstream_st *s = stream_of(h, &err);
    const unsigned long long id = s ? hb_id(s) : 0;
    unlock();
    return id;
}
