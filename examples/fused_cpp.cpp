/* SPDX-License-Identifier: BSD-2-Clause */
// The tile dataflow mode from C++ (cuweave/cuweave.hpp), two ways, with no
// C struct to zero:
//  1. a fused pipeline of cw::stage_op operators: "scale" (16 tiles of 256
//     values, from the request's input) -> "total" (one tile that reduces
//     all of them, CW_FUSED_READ_ALL), each stage given its ports' memory
//     by cuweave (pipeline::make_fused);
//  2. the same two stages as a cw::fused_plan (resident::set_fused), the
//     memory theirs to find through the loop's user pointer.
// 500 requests each; every total checked against the CPU's. Prints the
// GPU's own time per request for both.
//
// Without a GPU or NVRTC it says why and exits 77; exits 1 when a call fails
// or a result is wrong.
//
//   c++ -std=c++17 -Wall -Wextra -O2 -Iinclude examples/fused_cpp.cpp build/make/libcuweave.so -o fused_cpp
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cuweave/cuweave.hpp>

namespace {

constexpr unsigned N = 4096, TILE = 256, IN_WORDS = 16, LOG = 1024, REQUESTS = 500;

const char *k_source =
    "#include \"cuweave/resident_device.h\"\n"
    "#define N 4096u\n"
    "#define LOG 1024u\n"
    "__device__ void scale_tile(const cw_fused_tile *t, unsigned *v) {\n"
    "    const unsigned *in = (const unsigned *)t->input;\n"
    "    for (unsigned i = t->x0 + threadIdx.x; i < t->x0 + t->w; i += t->threads)\n"
    "        v[i] = in[i % 16u] * (i + 1u) + (unsigned)t->seq;\n"
    "}\n"
    "__device__ void total_tile(const cw_fused_tile *t, const unsigned *v, unsigned *log) {\n"
    "    unsigned *sh = (unsigned *)t->shared, acc = 0u;\n"
    "    for (unsigned i = threadIdx.x; i < N; i += t->threads) acc += v[i];\n"
    "    sh[threadIdx.x] = acc;\n"
    "    cw_fused_tile_sync(t);\n"
    "    for (unsigned s = t->threads / 2u; s > 0u; s >>= 1) {\n"
    "        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];\n"
    "        cw_fused_tile_sync(t);\n"
    "    }\n"
    "    if (threadIdx.x == 0u) log[(unsigned)(t->seq % LOG)] = sh[0];\n"
    "}\n"
    // 1. operators' stages: a pointer per port, as declared
    "__device__ void op_scale(const cw_fused_tile *t, void *user, unsigned *v) { scale_tile(t, v); }\n"
    "__device__ void op_total(const cw_fused_tile *t, void *user, const unsigned *v, unsigned *log) {\n"
    "    total_tile(t, v, log);\n"
    "}\n"
    // 2. a plan's stages: the loop's user pointer is theirs (N values, then the log)
    "extern \"C\" __device__ void plan_scale(const cw_fused_tile *t, void *user) { scale_tile(t, (unsigned *)user); }\n"
    "extern \"C\" __device__ void plan_total(const cw_fused_tile *t, void *user) {\n"
    "    total_tile(t, (const unsigned *)user, (unsigned *)user + N);\n"
    "}\n";

unsigned want(uint64_t seq, const unsigned *in) {
    unsigned total = 0;
    for (unsigned i = 0; i < N; i++) total += in[i % IN_WORDS] * (i + 1u) + static_cast<unsigned>(seq);
    return total;
}

// n requests on r; the totals read from `log` (LOG words) after each.
bool serve(const cw::resident &r, cw::stream &s, cw_devptr log, const char *what) {
    cw::host_buffer in = cw::host_buffer::alloc(s.context(), IN_WORDS * sizeof(unsigned));
    cw::host_buffer out = cw::host_buffer::alloc(s.context(), LOG * sizeof(unsigned));
    unsigned *const inp = in.as<unsigned>();
    const unsigned *const outp = out.as<unsigned>();
    r.launch();
    unsigned bad = 0;
    for (unsigned q = 0; q < REQUESTS; q++) {
        const cw_devptr slot = r.next_input(1000);
        for (unsigned j = 0; j < IN_WORDS; j++) inp[j] = q * 7919u + j * 31u;
        cw::copy_to_device(s, slot, inp, in.size());
        s.synchronize(); // the input is on the GPU before the doorbell
        const uint64_t seq = r.data_ready();
        r.wait_result(seq, 1000);
        cw::copy_to_host(s, out.data(), log, out.size());
        s.synchronize();
        if (outp[seq % LOG] != want(seq, inp) && bad++ < 5)
            fprintf(stderr, "fused_cpp: %s: request %llu: total %u, want %u\n", what, (unsigned long long)seq,
                    outp[seq % LOG], want(seq, inp));
    }
    const cw_resident_info info = r.info();
    r.tear_down(1000);
    printf("%s: %u requests, every total right: %s; the GPU's own time per request: median %.2f us (%u blocks)\n",
           what, REQUESTS, bad ? "NO" : "yes", info.iter_median_ns / 1e3, info.grid_blocks);
    return bad == 0 && info.iterations == REQUESTS;
}

cw_resident_settings loop_settings() {
    cw_resident_settings rs = cw::defaults<cw_resident_settings>();
    rs.input_slots = 2;
    rs.input_bytes = IN_WORDS * sizeof(unsigned);
    return rs;
}

bool run() {
    cw::context ctx = cw::context::create(0);
    cw::stream s = cw::stream::create(ctx);
    const cw_resident_settings rs = loop_settings();
    bool ok = true;
    {
        // 1. a pipeline of stages: cuweave hands each its ports' memory
        cw::pipeline p = cw::pipeline::create(ctx);
        p.add(cw::stage_op("scale", "op_scale").size(N).tile(TILE).output("v", N * sizeof(unsigned)));
        p.add(cw::stage_op("total", "op_total").tiles(1).shared_bytes(256 * sizeof(unsigned))
                  .input("v", cw::read_all())
                  .output("log", LOG * sizeof(unsigned)));
        p.connect("scale", "v", "total", "v");
        cw::resident r = cw::resident::create(ctx, &rs);
        cw::fused_plan opts(k_source); // the source and the loop's shape; the stages are the pipeline's
        opts.block_threads(256);
        p.make_fused(r, opts);
        ok = serve(r, s, p.port_ptr("total", "log"), "pipeline of stage_op") && ok;
    } // the loop goes before the pipeline whose memory it uses (declared after it)
    {
        // 2. the same stages as a plan: its memory through the loop's user pointer
        cw::buffer mem = cw::buffer::create(s, (N + LOG) * sizeof(unsigned));
        const cw_devptr base = mem.writable();
        s.synchronize();
        cw::fused_plan plan(k_source);
        plan.stage("plan_scale").size(N).tile(TILE);
        plan.stage("plan_total").tiles(1).shared_bytes(256 * sizeof(unsigned)).reads(cw::read_all("plan_scale"));
        plan.block_threads(256).user(base);
        cw::resident r = cw::resident::create(ctx, &rs);
        r.set_fused(plan);
        ok = serve(r, s, base + N * sizeof(unsigned), "fused_plan") && ok;
    }
    return ok;
}

} // namespace

int main() {
    printf("fused_cpp: the tile dataflow mode from C++, as a pipeline of stages and as a plan\n");
    try {
        try {
            cw::init();
        } catch (const cw::error &e) {
            if (e.status() != CW_ERROR_NO_DRIVER && e.status() != CW_ERROR_NO_DEVICE) throw;
            printf("no GPU here (%s): %s\n", cw::status_name(e.status()), e.what());
            return 77;
        }
        if (!cw::driver_has(CW_FEATURE_NVRTC)) {
            printf("no NVRTC here: %s\n", cw::error_message());
            return 77;
        }
        return run() ? 0 : 1;
    } catch (const cw::error &e) {
        fprintf(stderr, "fused_cpp: %s\n", e.what());
        if (e.status() == CW_ERROR_COMPILE) fprintf(stderr, "%s", cw::compile_log());
        return 1;
    }
}
