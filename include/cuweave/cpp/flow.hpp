/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/flow.h: cw::message, cw::io, cw::op_spec,
// cw::operator_base, cw::stage_op (a fused stage operator), cw::pipeline.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_FLOW_HPP
#define CUWEAVE_CPP_FLOW_HPP

#include "cuweave/cpp/buffer.hpp"
#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/resident.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- operators and pipelines ---------------------------------------------------

// A message received on an input port (borrowed for the compute call).
struct message {
    void *value = nullptr;
    buffer data;   // borrowed: share() to keep it
    stream producer; // borrowed: the stream the data was produced on (empty: none)
};

// What a compute call gets: the C cw_io, borrowed for the call.
class io {
  public:
    explicit io(cw_io *h) noexcept : h_(h) {}
    cw_io *get() const noexcept { return h_; }

    // The first message on an input port (CW_ERROR_NOT_READY: none).
    detail::ret<message> receive(const char *port) const {
        cw_message m{};
        cw_status st = cw_io_receive(h_, port, &m);
        message out;
        if (st == CW_SUCCESS) {
            out.value = m.value;
            out.data = buffer::borrow(m.buffer);
            out.producer = stream::borrow(m.stream);
        }
        return detail::make(st, std::move(out));
    }
    // Every message on the port (CW_PORT_MANY: one per connection that sent
    // one), borrowed for the call ...
    detail::ret<std::vector<message>> receive_many(const char *port) const {
        std::vector<message> out;
        size_t n = 0;
        cw_status st = cw_io_receive_many(h_, port, nullptr, 0, &n);
        if (st == CW_SUCCESS && n > 0) {
            std::vector<cw_message> m(n);
            st = cw_io_receive_many(h_, port, m.data(), n, &n);
            if (st == CW_SUCCESS) {
                out.resize(n < m.size() ? n : m.size());
                for (size_t i = 0; i < out.size(); i++) {
                    out[i].value = m[i].value;
                    out[i].data = buffer::borrow(m[i].buffer);
                    out[i].producer = stream::borrow(m[i].stream);
                }
            }
        }
        return detail::make(st, std::move(out));
    }
    // ... or up to cap of them as C messages; returns how many there are.
    detail::ret<size_t> receive_many(const char *port, cw_message *msgs, size_t cap) const {
        size_t n = 0;
        cw_status st = cw_io_receive_many(h_, port, msgs, cap, &n);
        return detail::make(st, std::move(n));
    }
    // True when the port has a message in this iteration (no error for none).
    bool has(const char *port) const noexcept {
        cw_message m{};
        return cw_io_receive(h_, port, &m) == CW_SUCCESS;
    }
    // The operator's internal stream, ordered behind the port's messages
    // (port nullptr: for sources). See flow.h, the stream rules.
    detail::ret<stream> receive_stream(const char *port = nullptr) const {
        cw_stream *s = nullptr;
        cw_status st = cw_io_receive_stream(h_, port, &s);
        return detail::make(st, stream::borrow(s));
    }
    // A named extra stream of the operator (the same name, the same stream).
    detail::ret<stream> named_stream(const char *name) const {
        cw_stream *s = nullptr;
        cw_status st = cw_io_get_stream(h_, name, &s);
        return detail::make(st, stream::borrow(s));
    }
    detail::void_ret set_output_stream(const char *port, const stream &s) const {
        return detail::done(cw_io_set_output_stream(h_, port, s.get()));
    }
    detail::void_ret emit(const char *port, const buffer &b, void *value = nullptr) const {
        return detail::done(cw_io_emit(h_, port, value, b.get()));
    }
    detail::void_ret emit_value(const char *port, void *value) const {
        return detail::done(cw_io_emit(h_, port, value, nullptr));
    }
    // A buffer on the internal stream, held by the call (borrowed here).
    detail::ret<buffer> alloc(size_t bytes) const {
        cw_buffer *b = nullptr;
        cw_status st = cw_io_alloc(&b, h_, bytes);
        return detail::make(st, buffer::borrow(b));
    }
    detail::ret<cw_devptr> port_ptr(const char *port) const {
        cw_devptr p = 0;
        cw_status st = cw_io_get_port_ptr(h_, port, &p);
        return detail::make(st, std::move(p));
    }
    // The resident loop's device block in a resident capture; 0 under run().
    cw_devptr resident_ctl() const noexcept {
        cw_io_info i{};
        (void)cw_io_get_info(h_, &i);
        return i.resident_ctl;
    }
    uint64_t iteration() const noexcept {
        cw_io_info i{};
        (void)cw_io_get_info(h_, &i);
        return i.iteration;
    }
    // The operator being computed (borrowed), and its name.
    cw_operator *op() const noexcept {
        cw_io_info i{};
        (void)cw_io_get_info(h_, &i);
        return i.op;
    }
    const char *op_name() const noexcept {
        cw_io_info i{};
        (void)cw_io_get_info(h_, &i);
        return i.name;
    }

  private:
    cw_io *h_;
};

// Where an operator declares its ports (in setup()).
class op_spec {
  public:
    explicit op_spec(cw_operator *op) noexcept : op_(op) {}
    // An input: flags CW_PORT_OPTIONAL / CW_PORT_MANY; bytes or dptr for port memory.
    op_spec &input(const char *name, unsigned flags = 0, size_t bytes = 0, cw_devptr dptr = 0) {
        cw_port_settings s;
        cw_port_settings_default(&s);
        s.flags = flags, s.bytes = bytes, s.dptr = dptr;
        note(cw_operator_add_input(op_, name, &s));
        return *this;
    }
    op_spec &output(const char *name, size_t bytes = 0, cw_devptr dptr = 0) {
        cw_port_settings s;
        cw_port_settings_default(&s);
        s.bytes = bytes, s.dptr = dptr;
        note(cw_operator_add_output(op_, name, &s));
        return *this;
    }
    cw_status first_error() const noexcept { return err_; }

  private:
    void note(cw_status s) {
        if (s != CW_SUCCESS && err_ == CW_SUCCESS) err_ = s;
#ifndef CW_HPP_NO_EXCEPTIONS
        detail::check(s);
#endif
    }
    cw_operator *op_;
    cw_status err_ = CW_SUCCESS;
};

// The base class of operators written in C++: declare ports in setup(),
// do the work in compute(). compute returns a status; in exceptions mode it
// may also throw (cw::error gives its status, anything else
// CW_ERROR_INTERNAL): nothing crosses into the C library.
class operator_base {
  public:
    virtual ~operator_base() = default;
    virtual void setup(op_spec &spec) = 0;
    virtual status compute(io &in_out) = 0;
    virtual status start() { return status(); }
    virtual void stop() noexcept {}
};

namespace detail {
inline cw_status op_guard(operator_base *op, int what, cw_io *h) noexcept {
#ifndef CW_HPP_NO_EXCEPTIONS
    try {
#endif
        if (what == 0) return op->start().code();
        io x(h);
        return op->compute(x).code();
#ifndef CW_HPP_NO_EXCEPTIONS
    } catch (const error &e) {
        return e.status();
    } catch (...) {
        return CW_ERROR_INTERNAL;
    }
#endif
}
inline cw_status op_start(cw_operator *, void *user) noexcept {
    return op_guard(static_cast<operator_base *>(user), 0, nullptr);
}
inline cw_status op_compute(cw_io *h, void *user) noexcept {
    return op_guard(static_cast<operator_base *>(user), 1, h);
}
inline void op_stop(cw_operator *, void *user) noexcept { static_cast<operator_base *>(user)->stop(); }
inline void op_destroy(void *user) noexcept { delete static_cast<operator_base *>(user); }
}  // namespace detail

// An operator that runs as a fused stage (cw_operator_create_stage), by
// value: its device function, its cut, its ports and how each input reads
// its producer (a cw::fused_dep without a stage: the connection says).
// pipeline::add(stage_op) makes it; pipeline::make_fused runs the pipeline.
//
//   p.add(cw::stage_op("blur", "blur_tile").size(1920, 1080).tile(64, 8)
//             .input("in", cw::read_neighbours(1), 0, frame_bytes)
//             .output("out", frame_bytes));
class stage_op {
  public:
    stage_op(std::string name, std::string function) : name_(std::move(name)), function_(std::move(function)) {}
    stage_op &tiles(uint32_t n) noexcept { return stage_.tiles = n, *this; }
    stage_op &size(uint32_t x, uint32_t y = 0) noexcept { return stage_.size[0] = x, stage_.size[1] = y, *this; }
    stage_op &tile(uint32_t x, uint32_t y = 0) noexcept { return stage_.tile[0] = x, stage_.tile[1] = y, *this; }
    stage_op &threads(uint32_t n) noexcept { return stage_.threads = n, *this; }
    stage_op &shared_bytes(uint32_t n) noexcept { return stage_.shared_bytes = n, *this; }
    stage_op &user(cw_devptr u) noexcept { return stage_.user = u, *this; }
    // An input port read as `read` (flags CW_PORT_OPTIONAL; bytes or dptr: port memory).
    stage_op &input(std::string port, fused_dep read, unsigned flags = 0, size_t bytes = 0, cw_devptr dptr = 0) {
        ports_.push_back(port_data{std::move(port), true, true, std::move(read), flags, bytes, dptr});
        return *this;
    }
    // An output port and its memory.
    stage_op &output(std::string port, size_t bytes = 0, cw_devptr dptr = 0) {
        ports_.push_back(port_data{std::move(port), false, false, fused_dep{}, 0, bytes, dptr});
        return *this;
    }
    const std::string &name() const noexcept { return name_; }
    // Makes the C operator (*out, the caller's until a pipeline takes it).
    cw_status create(cw_operator **out) const {
        std::vector<cw_port_read> reads;
        for (const port_data &p : ports_) {
            if (!p.read) continue;
            cw_port_read r{};
            r.port = p.name.c_str();
            r.read = static_cast<cw_fused_read>(p.how.read);
            r.radius = p.how.radius, r.scale_num = p.how.scale_num, r.scale_den = p.how.scale_den;
            r.previous = p.how.of_previous ? 1 : 0;
            r.function = p.how.function.empty() ? nullptr : p.how.function.c_str();
            reads.push_back(r);
        }
        cw_operator_stage st = stage_;
        st.function = function_.c_str();
        st.reads = reads.empty() ? nullptr : reads.data();
        st.read_count = static_cast<uint32_t>(reads.size());
        cw_operator *op = nullptr;
        cw_status s = cw_operator_create_stage(&op, name_.c_str(), &st);
        for (size_t i = 0; s == CW_SUCCESS && i < ports_.size(); i++) {
            const port_data &p = ports_[i];
            cw_port_settings ps;
            cw_port_settings_default(&ps);
            ps.flags = p.flags, ps.bytes = p.bytes, ps.dptr = p.dptr;
            s = p.input ? cw_operator_add_input(op, p.name.c_str(), &ps) : cw_operator_add_output(op, p.name.c_str(), &ps);
        }
        if (s != CW_SUCCESS) {
            cw_operator_destroy(&op);
            return s;
        }
        *out = op;
        return CW_SUCCESS;
    }

  private:
    struct port_data {
        std::string name;
        bool input, read;
        fused_dep how;
        unsigned flags;
        size_t bytes;
        cw_devptr dptr;
    };
    std::string name_, function_;
    cw_operator_stage stage_{};
    std::vector<port_data> ports_;
};

class pipeline : public detail::handle<pipeline, cw_pipeline, cw_pipeline_destroy> {
  public:
    using handle::handle;
    static detail::ret<pipeline> create(const cw::context &ctx, const cw_pipeline_settings *settings = nullptr) {
        cw_pipeline *p = nullptr;
        cw_status s = cw_pipeline_create(&p, ctx.get(), settings);
        return detail::make(s, pipeline(p, true));
    }
    // Adds a C++ operator (the pipeline owns it from now on; it is deleted
    // with the pipeline, or here when adding fails). Returns the borrowed
    // C operator.
    detail::ret<cw_operator *> add(const char *name, std::unique_ptr<operator_base> op,
                                   const cw_operator_settings *settings = nullptr) {
        static const cw_operator_ops ops = {detail::op_start, detail::op_compute, detail::op_stop, detail::op_destroy,
                                            {}};
        cw_operator *o = nullptr;
        operator_base *raw = op.get();
        cw_status s = cw_operator_create(&o, name, &ops, raw, settings);
        if (s != CW_SUCCESS) return detail::make(s, static_cast<cw_operator *>(nullptr));
        op.release();  // the C operator deletes it from now on
        op_spec spec(o);
#ifndef CW_HPP_NO_EXCEPTIONS
        try {
            raw->setup(spec);
        } catch (...) {
            cw_operator_destroy(&o);
            throw;
        }
#else
        raw->setup(spec);
#endif
        s = spec.first_error();
        if (s == CW_SUCCESS) s = cw_pipeline_add(get(), o);
        if (s != CW_SUCCESS) {
            cw_status keep = s;
            std::string m = cw_last_error()->message;
            cw_operator_destroy(&o);
#ifndef CW_HPP_NO_EXCEPTIONS
            throw error(keep, m);
#else
            return detail::make(keep, static_cast<cw_operator *>(nullptr));
#endif
        }
        return detail::make(CW_SUCCESS, std::move(o));
    }
    // Adds a fused stage operator (cw_operator_create_stage and its ports);
    // returns the borrowed C operator. On failure nothing is left.
    detail::ret<cw_operator *> add(const stage_op &op) {
        cw_operator *o = nullptr;
        cw_status s = op.create(&o);
        if (s == CW_SUCCESS) {
            s = cw_pipeline_add(get(), o);
            if (s != CW_SUCCESS) {
                cw_status keep = s;
#ifndef CW_HPP_NO_EXCEPTIONS
                std::string m = cw_last_error()->message;
#endif
                cw_operator_destroy(&o);
#ifndef CW_HPP_NO_EXCEPTIONS
                throw error(keep, m);
#else
                return detail::make(keep, static_cast<cw_operator *>(nullptr));
#endif
            }
        }
        return detail::make(s, std::move(o));
    }
    // Adds an operator made with the C API (cw_operator_create): the
    // pipeline owns it on success; on failure it stays the caller's.
    detail::void_ret add(cw_operator *op) { return detail::done(cw_pipeline_add(get(), op)); }
    template <class Op, class... A>
    detail::ret<cw_operator *> emplace(const char *name, A &&...args) {
        return add(name, std::unique_ptr<operator_base>(new Op(std::forward<A>(args)...)));
    }
    detail::void_ret connect(const char *from, const char *from_port, const char *to, const char *to_port) {
        return detail::done(cw_pipeline_connect(get(), from, from_port, to, to_port));
    }
    detail::void_ret check() { return detail::done(cw_pipeline_check(get())); }
    detail::void_ret run(uint64_t iterations) { return detail::done(cw_pipeline_run(get(), iterations)); }
    // Waits until the GPU has finished the work of every operator's last
    // compute call (run() returns when the compute calls have).
    detail::void_ret synchronize() { return detail::done(cw_pipeline_synchronize(get())); }
    detail::void_ret stop() { return detail::done(cw_pipeline_stop(get())); }
    // The operator named `name`, borrowed (CW_ERROR_INVALID_ARGUMENT when none).
    detail::ret<cw_operator *> find(const char *name) const {
        cw_operator *o = nullptr;
        cw_status s = cw_pipeline_get_operator(get(), name, &o);
        return detail::make(s, std::move(o));
    }
    // The device address of a port's memory, from outside compute (after
    // make_resident, or a run of a pipeline whose ports declare memory).
    detail::ret<cw_devptr> port_ptr(const char *op, const char *port) const {
        cw_devptr p = 0;
        cw_status s = cw_pipeline_get_port_ptr(get(), op, port, &p);
        return detail::make(s, std::move(p));
    }
    // The pipeline's context, borrowed.
    cw::context context() const noexcept {
        cw_pipeline_info i{};
        (void)cw_pipeline_get_info(get(), &i);
        return cw::context::borrow(i.context);
    }
    detail::void_ret make_resident(const resident &r) {
        return detail::done(cw_pipeline_make_resident(get(), r.get()));
    }
    // Makes every operator (each a stage_op) a stage of r's fused kernel
    // (cw_pipeline_make_fused): the source, options and shape from f, or
    // from a plan without stages (its describe()).
    detail::void_ret make_fused(const resident &r, const cw_resident_fused &f) {
        return detail::done(cw_pipeline_make_fused(get(), r.get(), &f));
    }
    detail::void_ret make_fused(const resident &r, const fused_plan &opts) {
        const fused_plan::description d = opts.describe();
#ifndef CW_HPP_NO_EXCEPTIONS
        if (!d.problem().empty()) throw error(CW_ERROR_INVALID_ARGUMENT, d.problem());
        detail::check(cw_pipeline_make_fused(get(), r.get(), &d.get()));
#else
        if (!d.problem().empty()) return status(CW_ERROR_INVALID_ARGUMENT);
        return detail::done(cw_pipeline_make_fused(get(), r.get(), &d.get()));
#endif
    }
    // Context and counters (cw_pipeline_get_info).
    cw_pipeline_info info() const noexcept {
        cw_pipeline_info st{};
        (void)cw_pipeline_get_info(get(), &st);
        return st;
    }
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_FLOW_HPP
