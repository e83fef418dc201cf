/* SPDX-License-Identifier: BSD-2-Clause */
/* docs/guide.md, "The resident loop": one graph launched once serves 100 requests on the GPU; each
 * request's input goes into a slot, the workload squares it and adds the request's number. Exit 77
 * without a GPU, NVRTC or conditional nodes (CUDA 12.3). */
#include <stdint.h>
#include <stdio.h>
#include <cuweave/cuweave.h>
#define TRY(x) do { if ((x) != CW_SUCCESS) { fprintf(stderr, "%s\n", cw_last_error()->message); return 1; } } while (0)
static const char *source = "#include \"cuweave/resident_device.h\"\n"
    "extern \"C\" __global__ void square(const cw_resident_ctl *ctl, unsigned *out) {\n"
    "    if (cw_resident_skip(ctl)) return;\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    unsigned i = threadIdx.x;\n"
    "    out[i] = in[i] * in[i] + (unsigned)cw_resident_sequence(ctl);\n}\n";
enum { N = 256 };
static unsigned in[N], res[N];

int main(void) {
    cw_status st = cw_init();
    if (st == CW_ERROR_NO_DRIVER || st == CW_ERROR_NO_DEVICE) return printf("no GPU: %s\n", cw_last_error()->message), 77;
    TRY(st);
    if (!cw_driver_has(CW_FEATURE_NVRTC) || !cw_driver_has(CW_FEATURE_CONDITIONAL_NODES))
        return printf("skipped: needs NVRTC and conditional nodes (CUDA 12.3)\n"), 77;
    cw_context *ctx; cw_stream *s; cw_buffer *out; cw_program *p; cw_module *m; cw_kernel *square;
    cw_resident *r; cw_graph *g = NULL;
    TRY(cw_context_create(&ctx, 0));
    TRY(cw_stream_create(&s, ctx, NULL));
    cw_header header = {"cuweave/resident_device.h", cw_builtin_get_resident_header()};
    cw_program_settings ps; cw_program_settings_default(&ps); ps.headers = &header; ps.n_headers = 1;
    TRY(cw_program_compile(&p, ctx, source, &ps));
    TRY(cw_module_load(&m, p));                           /* load before the loop runs: loads wait for loops */
    TRY(cw_module_get_kernel(m, "square", &square));
    cw_resident_settings rs; cw_resident_settings_default(&rs); rs.input_slots = 2; rs.input_bytes = sizeof in;
    TRY(cw_resident_create(&r, ctx, &rs));
    cw_devptr ctl, dout;
    TRY(cw_resident_get_ctl(r, &ctl));
    TRY(cw_buffer_create(&out, s, sizeof res));
    TRY(cw_buffer_get_writable(out, &dout));
    TRY(cw_stream_synchronize(s));                        /* the allocation done before the loop uses it */
    cw_launch_config cfg; cw_launch_config_default(&cfg); cfg.block[0] = N;
    TRY(cw_capture_begin(s, NULL, CW_CAPTURE_THREAD_LOCAL));   /* the workload: one launch */
    TRY(cw_kernel_launch(square, s, &cfg, (void *[]){&ctl, &dout}));
    TRY(cw_capture_end(&g, s));
    TRY(cw_resident_set_workload(r, g));
    TRY(cw_resident_launch(r));                           /* launched once; serves every request */
    size_t wrong = 0;
    for (unsigned k = 1; k <= 100; k++) {
        cw_devptr slot; uint64_t seq;
        for (unsigned i = 0; i < N; i++) in[i] = k + i;
        TRY(cw_resident_next_input(r, 1000, &slot));      /* a free input slot (1 s at most) */
        TRY(cw_copy_to_device(s, slot, in, sizeof in));
        TRY(cw_stream_synchronize(s));
        TRY(cw_resident_data_ready(r, &seq));             /* request seq: the loop runs the workload */
        TRY(cw_resident_wait_result(r, seq, 1000));
        TRY(cw_copy_to_host(s, res, dout, sizeof res));
        TRY(cw_stream_synchronize(s));
        for (unsigned i = 0; i < N; i++) wrong += res[i] != in[i] * in[i] + (unsigned)seq;
    }
    printf("100 requests, %zu wrong values\n", wrong);
    TRY(cw_resident_tear_down(r, 1000));                  /* stops the loop */
    cw_resident_destroy(&r); cw_graph_destroy(&g); cw_buffer_destroy(&out);
    cw_module_destroy(&m); cw_program_destroy(&p); cw_stream_destroy(&s); cw_context_destroy(&ctx);
    return wrong != 0;
}
