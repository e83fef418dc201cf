/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Graphs with cuweave: capture a few kernels into a graph, replay it,
 * update it with a new kernel argument, and run a loop on the GPU with a
 * WHILE node whose trip count is decided by device code.
 *
 *   1. capture   x = x*3 + 1; x = x*3 + 2   (kernel cw_mul_add, twice)
 *   2. replay    the graph 1000 times, then check x against the host's sum
 *   3. update    re-capture with + 5 instead of + 2: cw_graph_exec_update
 *                applies it in place; the next replay follows
 *   4. loop      [cw_set_cond(limit)] -> WHILE { cw_while_body(count, limit) }
 *                runs the body exactly *limit times, limit read on the GPU
 *
 * The kernels are the precompiled test kernels (tests/kernels); the example
 * loads them and allocates with a small dlopen of libcuda, as forkjoin.c
 * does (cuweave's own kernel API comes with the jit layer). Without a GPU it
 * says why and exits 77; exits 1 when a call fails or a result is wrong.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -Iinclude examples/graph.c \
 *      build/make/libcuweave.a -ldl -lpthread -lstdc++ -lm -o graph
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuweave/cuweave.h>

#include "../tests/kernels/test_kernels_fatbin.h"

typedef unsigned long long dptr;

static struct {
    int (*cuCtxPushCurrent)(CUcontext);
    int (*cuCtxPopCurrent)(CUcontext *);
    int (*cuModuleLoadData)(void **module, const void *image);
    int (*cuModuleUnload)(void *module);
    int (*cuModuleGetFunction)(void **fn, void *module, const char *name);
    int (*cuLaunchKernel)(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, CUstream stream, void **params, void **extra);
    int (*cuMemAlloc)(dptr *p, size_t bytes);
    int (*cuMemFree)(dptr p);
    int (*cuMemcpyHtoD)(dptr dst, const void *src, size_t bytes);
    int (*cuMemcpyDtoH)(void *dst, dptr src, size_t bytes);
} cu;

static int cu_open(void) {
    const char *path = getenv("CUWEAVE_LIBCUDA");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
#define SYM_(field, name) \
    if (!(*(void **)&cu.field = dlsym(lib, name))) return 0;
    SYM_(cuCtxPushCurrent, "cuCtxPushCurrent_v2")
    SYM_(cuCtxPopCurrent, "cuCtxPopCurrent_v2")
    SYM_(cuModuleLoadData, "cuModuleLoadData")
    SYM_(cuModuleUnload, "cuModuleUnload")
    SYM_(cuModuleGetFunction, "cuModuleGetFunction")
    SYM_(cuLaunchKernel, "cuLaunchKernel")
    SYM_(cuMemAlloc, "cuMemAlloc_v2")
    SYM_(cuMemFree, "cuMemFree_v2")
    SYM_(cuMemcpyHtoD, "cuMemcpyHtoD_v2")
    SYM_(cuMemcpyDtoH, "cuMemcpyDtoH_v2")
#undef SYM_
    return 1;
}

#define CU_TRY(expr)                                                          \
    do {                                                                      \
        int r_ = (expr);                                                      \
        if (r_ != 0) {                                                        \
            fprintf(stderr, "graph: %s failed with CUresult %d\n", #expr, r_); \
            goto out;                                                         \
        }                                                                     \
    } while (0)
#define CW_TRY(expr)                                                \
    do {                                                            \
        if ((expr) != CW_SUCCESS) {                                 \
            fprintf(stderr, "graph: %s\n", cw_last_error()->message); \
            goto out;                                               \
        }                                                           \
    } while (0)

static void *k_mul_add, *k_set_cond, *k_while_body;

static int launch(void *fn, cw_stream *s, void **args) {
    cw_stream_info info; /* the driver stream: no driver call to read it */
    if (cw_stream_get_info(s, &info) != CW_SUCCESS) return -1;
    return cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, info.handle, args, NULL);
}

static int mul_add(cw_stream *s, dptr x, int v) {
    void *args[] = {&x, &v};
    return launch(k_mul_add, s, args);
}

int main(void) {
    printf("graph: capture, replay, update, and a WHILE loop decided on the GPU\n");
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) {
        printf("no GPU here (%s): %s\n", cw_status_name(st), cw_last_error()->message);
        return 77;
    }
    if (st != CW_SUCCESS || !cu_open()) {
        fprintf(stderr, "graph: cannot start: %s\n", cw_last_error()->message);
        return 1;
    }
    int ok = 0, pushed = 0;
    cw_context *ctx = NULL;
    cw_stream *s = NULL;
    cw_graph *g = NULL, *loop = NULL, *body = NULL;
    cw_graph_exec *e = NULL, *le = NULL;
    CUcontext cuctx = NULL;
    void *module = NULL;
    dptr buf = 0; /* x, count, limit */
    int x = 0, expect = 0, count = 0;

    cw_context_info ctx_info;
    CW_TRY(cw_context_create(&ctx, 0));
    CW_TRY(cw_context_get_info(ctx, &ctx_info));
    cuctx = ctx_info.handle;
    CW_TRY(cw_stream_create(&s, ctx, NULL));
    CU_TRY(cu.cuCtxPushCurrent(cuctx));
    pushed = 1;
    CU_TRY(cu.cuModuleLoadData(&module, cw_test_kernels_fatbin));
    CU_TRY(cu.cuModuleGetFunction(&k_mul_add, module, "cw_mul_add"));
    CU_TRY(cu.cuModuleGetFunction(&k_set_cond, module, "cw_set_cond"));
    CU_TRY(cu.cuModuleGetFunction(&k_while_body, module, "cw_while_body"));
    CU_TRY(cu.cuMemAlloc(&buf, 3 * sizeof(int)));
    const int zeros[3] = {0, 0, 0};
    CU_TRY(cu.cuMemcpyHtoD(buf, zeros, sizeof zeros));

    /* 1. capture: the kernels are recorded, not run */
    CW_TRY(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    CU_TRY(mul_add(s, buf, 1));
    CU_TRY(mul_add(s, buf, 2));
    CW_TRY(cw_capture_end(&g, s));
    CW_TRY(cw_graph_instantiate(&e, g, 0));
    CW_TRY(cw_graph_exec_upload(e, s));

    /* 2. replay (x wraps around in int arithmetic on both sides alike) */
    for (int i = 0; i < 1000; i++) {
        CW_TRY(cw_graph_exec_launch(e, s));
        expect = (int)((unsigned)expect * 3u + 1u);
        expect = (int)((unsigned)expect * 3u + 2u);
    }
    CW_TRY(cw_stream_synchronize(s));
    CU_TRY(cu.cuMemcpyDtoH(&x, buf, sizeof x));
    printf("1000 replays: x = %d (host: %d) %s\n", x, expect, x == expect ? "ok" : "WRONG");
    if (x != expect) goto out;

    /* 3. update: same shape, new argument */
    cw_graph_destroy(&g);
    CW_TRY(cw_capture_begin(s, NULL, CW_CAPTURE_GLOBAL));
    CU_TRY(mul_add(s, buf, 1));
    CU_TRY(mul_add(s, buf, 5));
    CW_TRY(cw_capture_end(&g, s));
    cw_graph_update_info ui;
    CW_TRY(cw_graph_exec_update(e, g, &ui));
    CU_TRY(cu.cuMemcpyHtoD(buf, zeros, sizeof(int)));
    CW_TRY(cw_graph_exec_launch(e, s));
    CW_TRY(cw_stream_synchronize(s));
    CU_TRY(cu.cuMemcpyDtoH(&x, buf, sizeof x));
    printf("update %s: x = %d (expected %d) %s\n",
           ui.kind == CW_GRAPH_UPDATED_IN_PLACE ? "in place" : "by instantiating again", x, (0 * 3 + 1) * 3 + 5,
           x == 8 ? "ok" : "WRONG");
    if (x != 8) goto out;

    /* 4. a WHILE loop whose trip count device code decides */
    if (!cw_driver_has(CW_FEATURE_CONDITIONAL_NODES)) {
        printf("this driver has no conditional nodes: loop skipped\n");
        ok = 1;
        goto out;
    }
    {
        cw_cond_handle h = 0;
        cw_graph *got = NULL; /* what cw_capture_end hands back: the graph captured into */
        dptr cnt = buf + sizeof(int), lim = buf + 2 * sizeof(int);
        const int limit = 42;
        CU_TRY(cu.cuMemcpyHtoD(lim, &limit, sizeof limit));
        CW_TRY(cw_graph_create(&loop, ctx));
        CW_TRY(cw_graph_add_cond_handle(loop, 1, CW_COND_RESET_EACH_LAUNCH, &h));
        CW_TRY(cw_capture_begin(s, loop, CW_CAPTURE_GLOBAL));
        void *set_args[] = {&h, &lim};
        CU_TRY(launch(k_set_cond, s, set_args));
        CW_TRY(cw_capture_end(&got, s)); /* got == loop, still ours: destroyed once, at the end */
        cw_graph_node *after = NULL;
        size_t n = 0;
        CW_TRY(cw_graph_get_sinks(loop, &after, 1, &n));
        CW_TRY(cw_graph_add_conditional(loop, h, NULL /* WHILE */, &after, 1, NULL, &body, NULL));
        CW_TRY(cw_capture_begin(s, body, CW_CAPTURE_GLOBAL));
        void *body_args[] = {&h, &cnt, &lim};
        CU_TRY(launch(k_while_body, s, body_args));
        CW_TRY(cw_capture_end(&got, s)); /* got == body, owned by its node */
        CW_TRY(cw_graph_instantiate(&le, loop, 0));
        CW_TRY(cw_graph_exec_launch(le, s));
        CW_TRY(cw_stream_synchronize(s));
        CU_TRY(cu.cuMemcpyDtoH(&count, cnt, sizeof count));
        printf("WHILE node: the body ran %d times (limit %d, read on the GPU) %s\n", count, limit,
               count == limit ? "ok" : "WRONG");
        ok = count == limit;
    }

out:
    if (s) cw_stream_synchronize(s);
    cw_graph_exec_destroy(&e);
    cw_graph_exec_destroy(&le);
    cw_graph_destroy(&g);
    cw_graph_destroy(&loop); /* its body goes with it */
    if (pushed) {
        if (buf) cu.cuMemFree(buf);
        if (module) cu.cuModuleUnload(module);
        CUcontext popped = NULL;
        cu.cuCtxPopCurrent(&popped);
    }
    cw_stream_destroy(&s);
    cw_context_destroy(&ctx);
    return ok ? 0 : 1;
}
