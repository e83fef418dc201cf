/* SPDX-License-Identifier: BSD-2-Clause */
// The GPU-resident loop of examples/resident.c, driven from C++
// (cuweave/cuweave.hpp): one graph launched once, then 1000 requests, each
// with its own input. The workload is a kernel compiled with NVRTC that
// includes <cuweave/resident_device.h> (handed to NVRTC from memory by
// cw::resident_device_header()) to find its request number and input slot.
// Two input slots: the host fills the slot of request n+1 while request n
// runs. Prints the round trip seen by the host and the per-iteration time
// the GPU measured.
//
// Memory is cuweave's own: the output is a cw::buffer, the input and the
// result are staged in page-locked cw::host_buffer memory and copied with
// cw::copy_to_device / cw::copy_to_host on a stream of the loop's context
// (the loop runs on streams of its own; copies on another stream go on
// beside it). Every wrapper is RAII: the loop is torn down and destroyed
// before the memory it uses (it is declared after it).
//
// Without a GPU or NVRTC it says why and exits 77; exits 1 when a call fails
// or a result is wrong.
//
//   c++ -std=c++17 -Wall -Wextra -O2 -Iinclude examples/resident_cpp.cpp build-make/libcuweave.so -o resident_cpp
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <cuweave/cuweave.hpp>

namespace {

constexpr unsigned N = 256, REQUESTS = 1000;

const char *k_source =
    "#include \"cuweave/resident_device.h\"\n"
    "extern \"C\" __global__ void square(const cw_resident_ctl *ctl, unsigned *out) {\n"
    "    if (cw_resident_skip(ctl)) return;  // no request in this iteration (the loop stops)\n"
    "    const unsigned *in = (const unsigned *)cw_resident_input(ctl);\n"
    "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < 256) out[i] = in[i] * in[i] + (unsigned)cw_resident_sequence(ctl);\n"
    "}\n";

double now_us() {
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

bool run() {
    cw::context ctx = cw::context::create(0);
    cw::stream s = cw::stream::create(ctx);

    // the workload kernel, with the device header from memory
    cw_header header = {"cuweave/resident_device.h", cw::resident_device_header()};
    cw_program_settings ps = cw::defaults<cw_program_settings>();
    ps.name = "square_cpp.cu";
    ps.headers = &header;
    ps.n_headers = 1;
    cw::program prog = cw::program::compile(ctx, k_source, &ps);
    cw::module mod = cw::module::load(prog);
    cw::kernel square = mod.get_kernel("square");
    square.preload(ctx);       // loading code waits for running loops: load first
    (void)square.param_count(ctx); // and ask for its parameters before the capture

    // memory: the output on the device, the input and the result page-locked
    cw::buffer out = cw::buffer::create(s, N * sizeof(unsigned));
    const cw_devptr out_ptr = out.writable();
    s.synchronize(); // allocated on s: usable by the loop's own streams once s has got there
    cw::host_buffer in = cw::host_buffer::alloc(ctx, N * sizeof(unsigned));
    cw::host_buffer res = cw::host_buffer::alloc(ctx, N * sizeof(unsigned));
    unsigned *const inp = in.as<unsigned>();
    const unsigned *const resp = res.as<unsigned>();

    // the loop: two input slots; spin for 200 us after each request, then
    // sleep up to 100 us between checks
    cw_resident_settings rs = cw::defaults<cw_resident_settings>();
    rs.input_slots = 2;
    rs.input_bytes = N * sizeof(unsigned);
    rs.sleep_mode = CW_RESIDENT_SLEEP_ADAPTIVE;
    rs.sleep_interval_us = 100;
    rs.spin_us = 200;
    cw::resident r = cw::resident::create(ctx, &rs);

    // capture the workload: one launch of square(ctl, out); the loop copies
    // the graph (r.set_workload_fn(f) would have f enqueue it at each build)
    {
        cw::graph g;
        {
            cw::capture cap(s, CW_CAPTURE_THREAD_LOCAL);
            unsigned *const dst = reinterpret_cast<unsigned *>(static_cast<uintptr_t>(out_ptr));
            square.launch(s, cw::dims(1), cw::dims(N), r.ctl(), dst);
            g = cap.end();
        }
        r.set_workload(g);
    }
    r.launch();

    double total = 0, worst = 0;
    unsigned bad = 0;
    for (unsigned k = 1; k <= REQUESTS; k++) {
        const cw_devptr slot = r.next_input(1000); // free once request k-2 finished
        for (unsigned i = 0; i < N; i++) inp[i] = k + i;
        const double t0 = now_us();
        cw::copy_to_device(s, slot, inp, in.size());
        s.synchronize(); // the input is on the GPU before the request
        const uint64_t seq = r.data_ready();
        r.wait_result(seq, 1000);
        const double dt = now_us() - t0;
        total += dt;
        if (dt > worst) worst = dt;
        cw::copy_to_host(s, res.data(), out_ptr, res.size());
        s.synchronize();
        for (unsigned i = 0; i < N; i++) bad += resp[i] != inp[i] * inp[i] + static_cast<unsigned>(seq);
    }
    out.used_by(s); // the buffer's free waits for the copies (the loop is stopped before it goes)
    const bool ok = bad == 0;
    printf("%u requests: every output right: %s; host round trip (copy in, request, result) mean %.1f us, worst "
           "%.1f us\n",
           REQUESTS, ok ? "yes" : "NO", total / REQUESTS, worst);
    const cw_resident_info stats = r.info();
    printf("the GPU's own clock: %llu iterations, per iteration min %.2f us, median %.2f us, max %.2f us\n",
           (unsigned long long)stats.iterations, stats.iter_min_ns / 1e3, stats.iter_median_ns / 1e3,
           stats.iter_max_ns / 1e3);
    r.tear_down(1000);
    printf("torn down (%s)\n", r.state() == CW_RESIDENT_STOPPED ? "stopped" : "still stopping");
    return ok && stats.iterations == REQUESTS && r.state() == CW_RESIDENT_STOPPED;
}

} // namespace

int main() {
    printf("resident_cpp: a GPU-resident loop driven by the host, in C++\n");
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
        fprintf(stderr, "resident_cpp: %s\n", e.what());
        if (e.status() == CW_ERROR_COMPILE) fprintf(stderr, "%s", cw::compile_log());
        return 1;
    }
}
