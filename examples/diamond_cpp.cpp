/* SPDX-License-Identifier: BSD-2-Clause */
// The diamond of examples/diamond.c written in C++ (cuweave/cuweave.hpp):
// four cw::operator_base operators run by the CPU-driven executor.
//
//            +--> B (x*2+1, spins 2 ms) --+
//   A (fill) |                            +--> C (5*b + d, copies back)
//            +--> D (x*3+7, spins 2 ms) --+
//
// A takes its internal stream (io.receive_stream() with no port), allocates
// a cw::buffer on it (io.alloc), fills it with a kernel and emits it on
// "out", which goes to B.in and D.in. B and D each get their own internal
// stream ordered behind A's (io.receive_stream("in"): an event, no CPU
// wait), allocate an output buffer and run a slowish kernel: one block that
// spins 2 ms on the GPU clock (%globaltimer) and then transforms its input.
// C asks for its stream on both inputs and gets one stream ordered behind B
// and D. It combines the two and copies the result and the iteration's
// timestamps into page-locked memory (cw::host_buffer); after the run,
// pipeline::synchronize() waits for the GPU to finish every operator's work.
//
// The executor calls the operators one after the other on this thread; the
// compute calls only enqueue work, so B's and D's kernels run on the GPU at
// the same time. Every kernel writes its start and end time (the GPU's
// global timer) into one small stamps buffer allocated before the run, 8
// words per iteration. The example prints them relative to A's start, checks
// that B and D started after A ended and C after both B and D ended, reports
// whether B and D overlapped, and checks every output value. Nothing frees a
// buffer by hand: the pipeline records each operator's streams as uses of
// every buffer it touched, and the free waits for all of them. Errors are
// cw::error exceptions; one thrown inside compute stops the run, and the
// error names the operator.
//
// Kernels are compiled at run time with NVRTC. Without a GPU or NVRTC it
// says why and exits 77; exits 1 when a call fails, a value is wrong or the
// order was broken.
//
//   c++ -std=c++17 -Wall -Wextra -O2 -Iinclude examples/diamond_cpp.cpp build-make/libcuweave.so -o diamond_cpp
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <cuweave/cuweave.hpp>

namespace {

constexpr unsigned N = 4096;         // 32-bit values per message
constexpr unsigned ITERATIONS = 5;   // iterations of the pipeline
constexpr unsigned STAMPS = 8;       // per iteration: start, end of A, B, D, C (GPU ns)
constexpr unsigned long long A_NS = 200000;   // A spins 0.2 ms
constexpr unsigned long long BD_NS = 2000000; // B and D spin 2 ms each
constexpr unsigned long long C_NS = 200000;   // C spins 0.2 ms

// One block per kernel: small enough that B and D share the GPU.
const char *k_source =
    "__device__ __forceinline__ unsigned long long now_ns() {\n"
    "    unsigned long long t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    return t;\n"
    "}\n"
    "// thread 0 stamps the start and spins; everyone waits for it\n"
    "__device__ void begin(unsigned long long *stamp, unsigned long long spin_ns) {\n"
    "    if (threadIdx.x == 0) {\n"
    "        unsigned long long t0 = now_ns();\n"
    "        stamp[0] = t0;\n"
    "        while (now_ns() - t0 < spin_ns) { }\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n"
    "__device__ void end(unsigned long long *stamp) {\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) stamp[1] = now_ns();\n"
    "}\n"
    "extern \"C\" __global__ void produce(unsigned *out, unsigned n, unsigned it,\n"
    "                                    unsigned long long spin_ns, unsigned long long *stamp) {\n"
    "    begin(stamp, spin_ns);\n"
    "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = i * 3u + it * 1000u + 1u;\n"
    "    end(stamp);\n"
    "}\n"
    "extern \"C\" __global__ void transform(const unsigned *in, unsigned *out, unsigned n, unsigned mul,\n"
    "                                      unsigned add, unsigned long long spin_ns,\n"
    "                                      unsigned long long *stamp) {\n"
    "    begin(stamp, spin_ns);\n"
    "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i] * mul + add;\n"
    "    end(stamp);\n"
    "}\n"
    "extern \"C\" __global__ void combine(const unsigned *b, const unsigned *d, unsigned *out, unsigned n,\n"
    "                                    unsigned long long spin_ns, unsigned long long *stamp) {\n"
    "    begin(stamp, spin_ns);\n"
    "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = b[i] * 5u + d[i];\n"
    "    end(stamp);\n"
    "}\n";

// A device address as a typed pointer for a kernel argument.
template <class T>
T *dev(cw_devptr p) {
    return reinterpret_cast<T *>(static_cast<uintptr_t>(p));
}

// What the operators share: the kernels, the stamps, the results.
struct shared {
    cw::kernel produce, transform, combine;
    cw_devptr stamps = 0;               // device: ITERATIONS x STAMPS words
    unsigned *result = nullptr;         // page-locked: ITERATIONS x N
    unsigned long long *host_stamps = nullptr; // page-locked: ITERATIONS x STAMPS
    bool bad_stream = false;            // C got two different streams
};

const cw::dims one_block(1), threads(256);

unsigned iteration_of(const cw::io &io) {
    const uint64_t i = io.iteration();
    if (i >= ITERATIONS) throw cw::error(CW_ERROR_INVALID_STATE, "more iterations than the arrays hold");
    return static_cast<unsigned>(i);
}

// The stamp pair of operator slot `slot` (0 A, 2 B, 4 D, 6 C) in iteration it.
unsigned long long *stamp_of(const shared &sh, unsigned it, unsigned slot) {
    return dev<unsigned long long>(sh.stamps + (static_cast<cw_devptr>(it) * STAMPS + slot) * 8);
}

// A: the source.
struct source : cw::operator_base {
    shared &sh;
    explicit source(shared &s) : sh(s) {}
    void setup(cw::op_spec &spec) override { spec.output("out"); }
    cw::status compute(cw::io &io) override {
        const unsigned it = iteration_of(io);
        cw::stream s = io.receive_stream();            // the internal stream, no ordering
        cw::buffer b = io.alloc(N * sizeof(unsigned)); // on s; held by the call until compute returns
        sh.produce.launch(s, one_block, threads, dev<unsigned>(b.writable()), N, it, A_NS, stamp_of(sh, it, 0));
        io.emit("out", b); // takes its own reference; carries s
        return {};
    }
};

// B and D: one operator type, two parameter sets.
struct branch : cw::operator_base {
    shared &sh;
    unsigned mul, add, slot;
    branch(shared &s, unsigned m, unsigned a, unsigned st) : sh(s), mul(m), add(a), slot(st) {}
    void setup(cw::op_spec &spec) override { spec.input("in").output("out"); }
    cw::status compute(cw::io &io) override {
        const unsigned it = iteration_of(io);
        cw::message m = io.receive("in");
        if (!m.data) return cw::status(CW_ERROR_INVALID_STATE);
        cw::stream s = io.receive_stream("in"); // own stream, waits for A's on the GPU
        cw::buffer o = io.alloc(N * sizeof(unsigned));
        // the input is shared by B and D: read-only (ptr), the output is ours (writable)
        sh.transform.launch(s, one_block, threads, dev<const unsigned>(m.data.ptr()), dev<unsigned>(o.writable()), N,
                            mul, add, BD_NS, stamp_of(sh, it, slot));
        io.emit("out", o);
        return {};
    }
};

// C: the sink.
struct sink : cw::operator_base {
    shared &sh;
    explicit sink(shared &s) : sh(s) {}
    void setup(cw::op_spec &spec) override { spec.input("in_b").input("in_d"); }
    cw::status compute(cw::io &io) override {
        const unsigned it = iteration_of(io);
        cw::message mb = io.receive("in_b"), md = io.receive("in_d");
        if (!mb.data || !md.data) return cw::status(CW_ERROR_INVALID_STATE);
        cw::stream s = io.receive_stream("in_b");  // behind B
        cw::stream s2 = io.receive_stream("in_d"); // the same stream, now behind D too
        if (s.get() != s2.get()) {
            sh.bad_stream = true;
            throw cw::error(CW_ERROR_INTERNAL, "C was given two different streams for its two inputs");
        }
        cw::buffer o = io.alloc(N * sizeof(unsigned));
        sh.combine.launch(s, one_block, threads, dev<const unsigned>(mb.data.ptr()), dev<const unsigned>(md.data.ptr()),
                          dev<unsigned>(o.writable()), N, C_NS, stamp_of(sh, it, 6));
        // the result and this iteration's 8 stamps, in stream order after combine
        cw::copy_to_host(s, sh.result + static_cast<size_t>(it) * N, o.ptr(), N * sizeof(unsigned));
        cw::copy_to_host(s, sh.host_stamps + static_cast<size_t>(it) * STAMPS, sh.stamps + it * STAMPS * 8ull,
                         STAMPS * 8);
        return {};
    }
};

// Checks and prints one iteration; true when the order held and every value is right.
bool report(unsigned it, const unsigned *res, const unsigned long long *t, bool *overlapped) {
    int bad = 0;
    for (unsigned i = 0; i < N; i++) {
        const unsigned a = i * 3u + it * 1000u + 1u;
        const unsigned b = a * 2u + 1u, d = a * 3u + 7u;
        const unsigned want = b * 5u + d;
        if (res[i] != want) {
            if (bad < 3) fprintf(stderr, "diamond_cpp: iteration %u: out[%u] = %u, want %u\n", it, i, res[i], want);
            bad++;
        }
    }
    auto us = [&](unsigned long long x) { return static_cast<double>(static_cast<long long>(x - t[0])) / 1000.0; };
    printf("iteration %u: A %7.1f..%7.1f  B %7.1f..%7.1f  D %7.1f..%7.1f  C %7.1f..%7.1f us\n", it, us(t[0]),
           us(t[1]), us(t[2]), us(t[3]), us(t[4]), us(t[5]), us(t[6]), us(t[7]));
    const bool ordered = t[2] >= t[1] && t[4] >= t[1] && t[6] >= t[3] && t[6] >= t[5];
    *overlapped = t[2] < t[5] && t[4] < t[3];
    const long long both = static_cast<long long>((t[3] < t[5] ? t[3] : t[5]) - (t[2] > t[4] ? t[2] : t[4]));
    printf("             B and D overlapped: %s", *overlapped ? "yes" : "no");
    if (*overlapped) printf(" (for %.1f us)", both / 1000.0);
    printf("; A before B and D, C after both: %s; %d of %u values wrong\n", ordered ? "yes" : "NO", bad, N);
    return ordered && bad == 0 && t[0] != 0;
}

bool run() {
    cw::context ctx = cw::context::create(0);
    cw::stream s = cw::stream::create(ctx);

    cw_program_settings ps = cw::defaults<cw_program_settings>();
    ps.name = "diamond_cpp.cu";
    cw::program prog = cw::program::compile(ctx, k_source, &ps);
    cw::module mod = cw::module::load(prog);
    shared sh;
    sh.produce = mod.get_kernel("produce");
    sh.transform = mod.get_kernel("transform");
    sh.combine = mod.get_kernel("combine");
    // load them now rather than at their first launch inside the timeline
    for (const cw::kernel *k : {&sh.produce, &sh.transform, &sh.combine}) k->preload(ctx);

    // The stamps: allocated on s and zeroed (the zeros come from page-locked
    // memory, zeroed by its allocation); once s is synchronized the memory is
    // usable from every stream. It lives across the whole run.
    cw::host_buffer host_stamps = cw::host_buffer::alloc(ctx, ITERATIONS * STAMPS * 8);
    cw::host_buffer result = cw::host_buffer::alloc(ctx, ITERATIONS * N * sizeof(unsigned));
    cw::buffer stamps = cw::buffer::create(s, host_stamps.size());
    sh.stamps = stamps.writable();
    cw::copy_to_device(s, sh.stamps, host_stamps.data(), host_stamps.size());
    stamps.used_by(s);
    s.synchronize();
    sh.host_stamps = host_stamps.as<unsigned long long>();
    sh.result = result.as<unsigned>();

    // the pipeline: its own lease pool, every compute call on this thread
    // (declared after the memory it writes: it goes first)
    cw::pipeline p = cw::pipeline::create(ctx);
    p.emplace<source>("A", sh);
    p.emplace<branch>("B", sh, 2u, 1u, 2u);
    p.emplace<branch>("D", sh, 3u, 7u, 4u);
    p.emplace<sink>("C", sh);
    p.connect("A", "out", "B", "in");
    p.connect("A", "out", "D", "in");
    p.connect("B", "out", "C", "in_b");
    p.connect("D", "out", "C", "in_d");
    p.check();
    try {
        p.run(ITERATIONS);
        p.synchronize(); // the compute calls have returned; now the GPU has finished too
    } catch (const cw::error &) {
        // a failed run may leave work in flight that writes the host memory:
        // let it finish before anything is freed (errors here are the same fault)
        (void)cw_context_synchronize(ctx.get());
        throw;
    }

    const cw_pipeline_info stats = p.info();
    printf("%llu iterations, %llu compute calls, %llu skipped, %llu stream fallbacks, %llu buffers allocated, "
           "%llu reused\n",
           (unsigned long long)stats.iterations, (unsigned long long)stats.computes,
           (unsigned long long)stats.skipped, (unsigned long long)stats.fallbacks,
           (unsigned long long)stats.buffers_allocated, (unsigned long long)stats.buffers_reused);
    printf("device timestamps from A's start (us):\n");
    bool ok = stats.iterations == ITERATIONS && stats.computes == 4 * ITERATIONS && !sh.bad_stream;
    unsigned overlaps = 0;
    for (unsigned it = 0; it < ITERATIONS; it++) {
        bool overlapped = false;
        ok &= report(it, sh.result + static_cast<size_t>(it) * N, sh.host_stamps + static_cast<size_t>(it) * STAMPS,
                     &overlapped);
        overlaps += overlapped;
    }
    printf("B and D overlapped on the GPU in %u of %u iterations%s\n", overlaps, ITERATIONS,
           overlaps ? "" : " (CUWEAVE_SERIALIZE=1, or a GPU busy with other work?)");
    printf("every value right and the order kept: %s\n", ok ? "yes" : "NO");
    return ok;
}

} // namespace

int main() {
    printf("diamond_cpp: A -> (B, D) -> C with the CPU executor, in C++, %u iterations; B and D spin %.1f ms each\n",
           ITERATIONS, BD_NS / 1e6);
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
        fprintf(stderr, "diamond_cpp: %s\n", e.what());
        if (e.status() == CW_ERROR_COMPILE) fprintf(stderr, "%s", cw::compile_log());
        return 1;
    }
}
