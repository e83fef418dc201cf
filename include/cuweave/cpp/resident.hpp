/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/resident.h: cw::resident (the GPU-resident loop),
// cw::fused_plan (a tile dataflow plan by value) with cw::fused_dep,
// cw::fused_read and the cw::read_* helpers, cw::resident_device_header.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_RESIDENT_HPP
#define CUWEAVE_CPP_RESIDENT_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/graph.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {

// ---- tile dataflow plans (values, shared by both modes) -------------------------

// What a tile reads of another stage (cw_fused_read).
enum class fused_read : unsigned {
    same = CW_FUSED_READ_SAME,             // tile i of an equal tile grid
    neighbours = CW_FUSED_READ_NEIGHBOURS, // the tiles it maps to, radius more each way
    all = CW_FUSED_READ_ALL,               // every tile of the stage
    function = CW_FUSED_READ_FUNCTION      // the tiles a device function names
};

// One dependency by value (a cw_fused_dep, or a fused stage's cw_port_read):
// made by cw::read_same / read_neighbours / read_all / read_function, then
// .previous() for the previous request's tiles. The stage read is named
// (its function's name), numbered (its index in the plan), or, for an
// input port of a fused pipeline (cw::stage_op::input), neither: the
// connection says.
struct fused_dep {
    std::string stage_name;            // by name ("" with a number, or for a port)
    uint32_t stage = UINT32_MAX;       // by number (UINT32_MAX: by name)
    fused_read read = fused_read::same;
    uint32_t radius = 0, scale_num = 0, scale_den = 0;  // neighbours (scale 0/0: 1/1)
    bool of_previous = false;          // the previous request's tiles
    std::string function;              // fused_read::function: the device function
    fused_dep &previous(bool on = true) {
        of_previous = on;
        return *this;
    }
};

namespace detail {
inline fused_dep dep_of(fused_read how, std::string name, uint32_t index) {
    fused_dep d;
    d.read = how;
    d.stage_name = std::move(name);
    d.stage = index;
    return d;
}
}  // namespace detail

// Tile for tile (equal tile grids).
inline fused_dep read_same() { return detail::dep_of(fused_read::same, std::string(), UINT32_MAX); }
inline fused_dep read_same(uint32_t stage) { return detail::dep_of(fused_read::same, std::string(), stage); }
inline fused_dep read_same(std::string stage) { return detail::dep_of(fused_read::same, std::move(stage), UINT32_MAX); }
// Every tile.
inline fused_dep read_all() { return detail::dep_of(fused_read::all, std::string(), UINT32_MAX); }
inline fused_dep read_all(uint32_t stage) { return detail::dep_of(fused_read::all, std::string(), stage); }
inline fused_dep read_all(std::string stage) { return detail::dep_of(fused_read::all, std::move(stage), UINT32_MAX); }
// The tiles a tile maps to at scale num/den (0/0: 1/1), radius more each way.
inline fused_dep read_neighbours(uint32_t radius, uint32_t num = 0, uint32_t den = 0) {
    fused_dep d = detail::dep_of(fused_read::neighbours, std::string(), UINT32_MAX);
    d.radius = radius, d.scale_num = num, d.scale_den = den;
    return d;
}
inline fused_dep read_neighbours(uint32_t stage, uint32_t radius, uint32_t num, uint32_t den) {
    fused_dep d = read_neighbours(radius, num, den);
    d.stage = stage;
    return d;
}
inline fused_dep read_neighbours(std::string stage, uint32_t radius, uint32_t num = 0, uint32_t den = 0) {
    fused_dep d = read_neighbours(radius, num, den);
    d.stage_name = std::move(stage);
    return d;
}
// The tiles device function `fn` names (extern "C" __device__ int fn(const cw_fused_tile *t, unsigned i)).
inline fused_dep read_function(std::string fn) {
    fused_dep d = detail::dep_of(fused_read::function, std::string(), UINT32_MAX);
    d.function = std::move(fn);
    return d;
}
inline fused_dep read_function(std::string stage, std::string fn) {
    fused_dep d = read_function(std::move(fn));
    d.stage_name = std::move(stage);
    return d;
}
inline fused_dep read_function(uint32_t stage, std::string fn) {
    fused_dep d = read_function(std::move(fn));
    d.stage = stage;
    return d;
}

inline namespace CW_HPP_MODE {

// A tile dataflow plan by value (cw_resident_fused in CW_FUSED_DATAFLOW
// mode): the source, the stages and what they read, the loop's shape.
// Nothing to zero, nothing to keep alive: describe() builds the C
// description (const: threads may share a plan), c() keeps one in the plan.
// Copyable (a copy's c() is its own).
//
//   cw::fused_plan plan(source);
//   plan.stage("blur").tiles(135);
//   plan.stage("hist").tiles(135).reads(cw::read_same("blur"));
//   plan.stage("sad").tiles(135).reads(cw::read_same("blur"), cw::read_same("blur").previous());
//   plan.stage("result").tiles(1).reads(cw::read_all("hist"), cw::read_all("sad"));
//   plan.block_threads(256).in_flight(2);
//   loop.set_fused(plan);
class fused_plan {
    struct stage_data {
        std::string name;
        cw_fused_stage cut{};  // tiles, size, tile, threads, shared_bytes (name and deps filled by c())
        std::vector<fused_dep> deps;
    };

  public:
    fused_plan() = default;
    explicit fused_plan(std::string source) : source_(std::move(source)) {}

    // One stage, to describe in place (valid until the next stage is added).
    class stage_ref {
      public:
        stage_ref(stage_data *s) noexcept : s_(s) {}
        stage_ref &tiles(uint32_t n) noexcept { return s_->cut.tiles = n, *this; }
        stage_ref &size(uint32_t x, uint32_t y = 0) noexcept { return s_->cut.size[0] = x, s_->cut.size[1] = y, *this; }
        stage_ref &tile(uint32_t x, uint32_t y = 0) noexcept { return s_->cut.tile[0] = x, s_->cut.tile[1] = y, *this; }
        stage_ref &threads(uint32_t n) noexcept { return s_->cut.threads = n, *this; }
        stage_ref &shared_bytes(uint32_t n) noexcept { return s_->cut.shared_bytes = n, *this; }
        template <class... D>
        stage_ref &reads(fused_dep d, D &&...more) {
            s_->deps.push_back(std::move(d));
            if constexpr (sizeof...(D) > 0) reads(std::forward<D>(more)...);
            return *this;
        }

      private:
        stage_data *s_;
    };

    // A new stage: its device function `name` (extern "C" __device__ void
    // name(const cw_fused_tile *t, void *user)), run after those added before.
    stage_ref stage(std::string name) {
        stages_.push_back(stage_data{std::move(name), cw_fused_stage{}, {}});
        return stage_ref(&stages_.back());
    }
    // Stage i again (0 <= i < size()).
    stage_ref stage(size_t i) { return stage_ref(&stages_.at(i)); }
    size_t size() const noexcept { return stages_.size(); }
    // The stage named `name`'s index, or -1.
    long index_of(const std::string &name) const noexcept {
        for (size_t i = 0; i < stages_.size(); i++)
            if (stages_[i].name == name) return static_cast<long>(i);
        return -1;
    }

    fused_plan &source(std::string s) { return source_ = std::move(s), *this; }
    fused_plan &option(std::string o) { return options_.push_back(std::move(o)), *this; }
    fused_plan &user(cw_devptr u) noexcept { return f_.user = u, *this; }
    fused_plan &grid_blocks(uint32_t n) noexcept { return f_.grid_blocks = n, *this; }
    fused_plan &block_threads(uint32_t n) noexcept { return f_.block_threads = n, *this; }
    fused_plan &shared_bytes(uint32_t n) noexcept { return f_.shared_bytes = n, *this; }
    fused_plan &in_flight(uint32_t n) noexcept { return f_.in_flight = n, *this; }
    fused_plan &watchdog_ms(uint32_t ms) noexcept { return f_.watchdog_ms = ms, *this; }

    // The C description with the arrays it points into, owned by it (it
    // points into the plan's strings too: valid while the plan is unchanged
    // and alive). Movable, not copyable.
    class description {
      public:
        description() = default;
        description(description &&) noexcept = default;
        description &operator=(description &&) noexcept = default;
        description(const description &) = delete;
        description &operator=(const description &) = delete;
        const cw_resident_fused &get() const noexcept { return f_; }
        // Why the plan cannot be described ("" when it can).
        const std::string &problem() const noexcept { return problem_; }

      private:
        friend class fused_plan;
        std::vector<cw_fused_stage> stages_;
        std::vector<cw_fused_dep> deps_;
        std::vector<const char *> options_;
        std::string problem_;
        cw_resident_fused f_{};
    };

    // The plan's C description (mode CW_FUSED_DATAFLOW; with no stage, what
    // cw_pipeline_make_fused takes), built anew: const, so several threads
    // may describe one plan at once (set_fused and make_fused do this). A
    // dependency naming a stage the plan has not is in problem().
    description describe() const {
        description d;
        d.stages_.assign(stages_.size(), cw_fused_stage{});
        size_t ndeps = 0;
        for (const stage_data &s : stages_) ndeps += s.deps.size();
        d.deps_.reserve(ndeps);  // no reallocation below: the stages point into it
        for (size_t i = 0; i < stages_.size(); i++) {
            const stage_data &s = stages_[i];
            cw_fused_stage &c = d.stages_[i];
            c = s.cut;
            c.name = s.name.c_str();
            c.deps = s.deps.empty() ? nullptr : d.deps_.data() + d.deps_.size();
            c.dep_count = static_cast<uint32_t>(s.deps.size());
            for (const fused_dep &dep : s.deps) {
                cw_fused_dep cd{};
                cd.stage = dep.stage;
                if (dep.stage == UINT32_MAX) {
                    const long k = index_of(dep.stage_name);
                    if (k < 0 && d.problem_.empty())
                        d.problem_ = "cw::fused_plan: stage '" + s.name + "' reads '" + dep.stage_name +
                                     "', which is not a stage of the plan";
                    cd.stage = k < 0 ? UINT32_MAX : static_cast<uint32_t>(k);
                }
                cd.read = static_cast<cw_fused_read>(dep.read);
                cd.radius = dep.radius, cd.scale_num = dep.scale_num, cd.scale_den = dep.scale_den;
                cd.previous = dep.of_previous ? 1 : 0;
                cd.function = dep.function.empty() ? nullptr : dep.function.c_str();
                d.deps_.push_back(cd);
            }
        }
        for (const std::string &o : options_) d.options_.push_back(o.c_str());
        d.f_ = f_;
        d.f_.source = source_.c_str();
        d.f_.mode = CW_FUSED_DATAFLOW;
        d.f_.stage_defs = d.stages_.empty() ? nullptr : d.stages_.data();
        d.f_.stage_count = static_cast<uint32_t>(d.stages_.size());
        d.f_.options = d.options_.empty() ? nullptr : d.options_.data();
        d.f_.option_count = static_cast<uint32_t>(d.options_.size());
        return d;
    }

    // The C description kept in the plan (describe()'s), pointing into it:
    // valid until the plan changes, goes, or c() is called again. Not const:
    // it rewrites what the last c() returned (one thread at a time). An
    // unknown stage name: CW_ERROR_INVALID_ARGUMENT (a cw::error saying
    // which; without exceptions, problem() says).
    detail::ret<cw_resident_fused> c() {
        own_.d = describe();
        problem_ = own_.d.problem();
#ifndef CW_HPP_NO_EXCEPTIONS
        if (!problem_.empty()) throw error(CW_ERROR_INVALID_ARGUMENT, problem_);
        return own_.d.get();
#else
        if (!problem_.empty()) return result<cw_resident_fused>(CW_ERROR_INVALID_ARGUMENT);
        return result<cw_resident_fused>(own_.d.get());
#endif
    }
    // What the last c() refused ("" when it did not).
    const std::string &problem() const noexcept { return problem_; }

  private:
    std::string source_;
    std::vector<std::string> options_;
    std::vector<stage_data> stages_;
    cw_resident_fused f_{};
    // What c() returned last: it points into this plan, so a copy or a move
    // of the plan starts without one.
    struct kept {
        description d;
        kept() = default;
        kept(const kept &) noexcept {}
        kept(kept &&) noexcept {}
        kept &operator=(const kept &) noexcept { return d = description(), *this; }
        kept &operator=(kept &&) noexcept { return d = description(), *this; }
    };
    kept own_;
    std::string problem_;
};

// ---- the GPU-resident loop ------------------------------------------------------

// The destructor (cw_resident_destroy, which never fails) tears a launched
// loop down first, up to the settings' destroy_timeout_ms; a loop that will
// not stop by then is abandoned and logged (CW_LOG_ERROR), its memory freed
// once it is seen stopped. tear_down(ms) is the member that reports: call it
// first to learn whether the loop stops.
class resident : public detail::handle<resident, cw_resident, cw_resident_destroy> {
  public:
    using handle::handle;
    static detail::ret<resident> create(const cw::context &c, const cw_resident_settings *settings = nullptr) {
        cw_resident *r = nullptr;
        cw_status s = cw_resident_create(&r, c.get(), settings);
        return detail::make(s, resident(r, true));
    }
    // The device block kernels receive (a cw_resident_ctl *), as a CUdeviceptr.
    cw_devptr ctl() const noexcept {
        cw_devptr p = 0;
        (void)cw_resident_get_ctl(get(), &p);
        return p;
    }
    // The loop's context, borrowed (from cw_resident_get_info: a driver call).
    cw::context context() const noexcept {
        cw_resident_info i{};
        (void)cw_resident_get_info(get(), &i);
        return cw::context::borrow(i.context);
    }
    // The device address of input slot `slot` (0 <= slot < input_slots).
    detail::ret<cw_devptr> input(uint32_t slot) const {
        cw_devptr p = 0;
        cw_status s = cw_resident_get_input(get(), slot, &p);
        return detail::make(s, std::move(p));
    }
    detail::void_ret configure(const cw_resident_settings &s) const { return detail::done(cw_resident_configure(get(), &s)); }
    // The settings in force.
    detail::ret<cw_resident_settings> settings() const {
        cw_resident_settings st{};
        cw_status s = cw_resident_get_settings(get(), &st);
        return detail::make(s, std::move(st));
    }
    // The workload / data-ready handler as a graph (copied: g may go), or
    // (graph() empty) none.
    detail::void_ret set_workload(const graph &g) const { return detail::done(cw_resident_set_workload(get(), g.get())); }
    detail::void_ret set_handler(const graph &g) const { return detail::done(cw_resident_set_handler(get(), g.get())); }
    // The workload / handler as what a function enqueues on a stream that
    // captures into the loop's graph, called at each build once per copy of
    // the iteration: a C function and its user pointer (nullptr removes) ...
    detail::void_ret set_workload_fn(cw_resident_capture_fn fn, void *user) const {
        return detail::done(cw_resident_set_workload_fn(get(), fn, user));
    }
    detail::void_ret set_handler_fn(cw_resident_capture_fn fn, void *user) const {
        return detail::done(cw_resident_set_handler_fn(get(), fn, user));
    }
    // ... or a function object called as f(cw::stream &s), returning
    // cw::status, cw_status or nothing (success); in exceptions mode it may
    // throw (a cw::error gives its status, anything else CW_ERROR_INTERNAL).
    // Used by reference: it must outlive the loop's builds and launches.
    template <class F>
    detail::void_ret set_workload_fn(F &f) const {
        return detail::done(cw_resident_set_workload_fn(get(), &capture_tramp<F>::call, detail::user_ptr(f)));
    }
    template <class F>
    detail::void_ret set_handler_fn(F &f) const {
        return detail::done(cw_resident_set_handler_fn(get(), &capture_tramp<F>::call, detail::user_ptr(f)));
    }
    // Inside a capture function: begins / ends a traced stage on the
    // capture stream s (cw_resident_stage_begin; settings.trace). The number
    // is CW_RESIDENT_NO_STAGE when the loop does not trace.
    detail::ret<uint32_t> stage_begin(const stream &s, const char *name) const {
        uint32_t stage = CW_RESIDENT_NO_STAGE;
        cw_status st = cw_resident_stage_begin(get(), s.get(), name, &stage);
        return detail::make(st, std::move(stage));
    }
    detail::void_ret stage_end(const stream &s, uint32_t stage) const {
        return detail::done(cw_resident_stage_end(get(), s.get(), stage));
    }
    // Fused persistent mode (cw_resident_set_fused): one persistent kernel
    // compiled from f's stages; nullptr makes it a graph loop again.
    detail::void_ret set_fused(const cw_resident_fused *f) const { return detail::done(cw_resident_set_fused(get(), f)); }
    detail::void_ret set_fused(const cw_resident_fused &f) const { return detail::done(cw_resident_set_fused(get(), &f)); }
    // ... or from a tile dataflow plan (its c(); an unknown stage name is
    // refused before the C call).
    detail::void_ret set_fused(const fused_plan &plan) const {
        const fused_plan::description d = plan.describe();
#ifndef CW_HPP_NO_EXCEPTIONS
        if (!d.problem().empty()) throw error(CW_ERROR_INVALID_ARGUMENT, d.problem());
        detail::check(cw_resident_set_fused(get(), &d.get()));
#else
        if (!d.problem().empty()) return status(CW_ERROR_INVALID_ARGUMENT);
        return detail::done(cw_resident_set_fused(get(), &d.get()));
#endif
    }
    detail::void_ret build() const { return detail::done(cw_resident_build(get())); }
    detail::void_ret launch() const { return detail::done(cw_resident_launch(get())); }
    // Stops a launched loop, waiting up to timeout_ms (cw_resident_tear_down):
    // the one call that reports whether it stopped (CW_ERROR_TIMEOUT: still
    // launched; call it again, or let the destructor abandon it). Nothing to
    // do for a loop that is not launched.
    detail::void_ret tear_down(uint32_t timeout_ms) const { return detail::done(cw_resident_tear_down(get(), timeout_ms)); }
    // Running or stopping (cw_resident_get_state).
    bool is_launched() const noexcept {
        cw_resident_state st = CW_RESIDENT_NOT_LAUNCHED;
        (void)cw_resident_get_state(get(), &st);
        return st == CW_RESIDENT_RUNNING || st == CW_RESIDENT_STOPPING;
    }
    // Not launched, running, stopping or stopped (info().exit says why).
    cw_resident_state state() const noexcept {
        cw_resident_state st = CW_RESIDENT_NOT_LAUNCHED;
        (void)cw_resident_get_state(get(), &st);
        return st;
    }
    // The request's number.
    detail::ret<uint64_t> data_ready() const {
        uint64_t seq = 0;
        cw_status s = cw_resident_data_ready(get(), &seq);
        return detail::make(s, std::move(seq));
    }
    // Whether request seq has finished (cw_resident_poll_result: its
    // CW_ERROR_NOT_READY is false here, not an error).
    detail::ret<bool> result_ready(uint64_t seq) const {
        cw_status s = cw_resident_poll_result(get(), seq);
        bool ready = s == CW_SUCCESS;
        if (s == CW_ERROR_NOT_READY) s = CW_SUCCESS;
        return detail::make(s, std::move(ready));
    }
    detail::void_ret wait_result(uint64_t seq, uint32_t timeout_ms) const {
        return detail::done(cw_resident_wait_result(get(), seq, timeout_ms));
    }
    // The input slot the next request reads, once free.
    detail::ret<cw_devptr> next_input(uint32_t timeout_ms) const {
        cw_devptr p = 0;
        cw_status s = cw_resident_next_input(get(), timeout_ms, &p);
        return detail::make(s, std::move(p));
    }
    // Context, state and the statistics the GPU keeps (a copy from the GPU).
    detail::ret<cw_resident_info> info() const {
        cw_resident_info st{};
        cw_status s = cw_resident_get_info(get(), &st);
        return detail::make(s, std::move(st));
    }

  private:
    template <class F>
    struct capture_tramp {
        static cw_status call(cw_stream *s, void *user) noexcept {
            stream st = stream::borrow(s);
            return detail::call_for_c(*static_cast<F *>(user), st);
        }
    };
};

// The text of <cuweave/resident_device.h>, for NVRTC programs: an in-memory
// header named "cuweave/resident_device.h" (cw_header).
inline const char *resident_device_header() noexcept { return cw_builtin_get_resident_header(); }

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_RESIDENT_HPP
