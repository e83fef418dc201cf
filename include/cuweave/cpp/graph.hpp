/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/graph.h: cw::graph, cw::graph_exec, cw::capture.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_GRAPH_HPP
#define CUWEAVE_CPP_GRAPH_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- graphs -------------------------------------------------------------------

class graph : public detail::handle<graph, cw_graph, cw_graph_destroy> {
  public:
    using handle::handle;
    // An empty graph, to build from parts or to capture into.
    static detail::ret<graph> create(const cw::context &ctx) {
        cw_graph *g = nullptr;
        cw_status s = cw_graph_create(&g, ctx.get());
        return detail::make(s, graph(g, true));
    }

    cw_graph_info info() const noexcept {
        cw_graph_info i{};
        (void)cw_graph_get_info(get(), &i);
        return i;
    }
    // The driver graph (borrowed), for nodes cuweave has no call for.
    CUgraph native() const noexcept { return info().handle; }
    // The graph's context, borrowed.
    cw::context context() const noexcept { return cw::context::borrow(info().context); }
    // Writes the graph in Graphviz DOT form (verbose: every node's parameters).
    detail::void_ret write_dot(const char *path, bool verbose = false) const {
        return detail::done(cw_graph_write_dot(get(), path, verbose ? 1 : 0));
    }
    // A node running a copy of child after deps.
    detail::ret<cw_graph_node *> add_child(const graph &child, cw_graph_node *const *deps = nullptr,
                                           size_t ndeps = 0) const {
        cw_graph_node *n = nullptr;
        cw_status s = cw_graph_add_child(get(), child.get(), deps, ndeps, &n);
        return detail::make(s, std::move(n));
    }
    detail::ret<cw_graph_node *> add_empty(cw_graph_node *const *deps = nullptr, size_t ndeps = 0) const {
        cw_graph_node *n = nullptr;
        cw_status s = cw_graph_add_empty(get(), deps, ndeps, &n);
        return detail::make(s, std::move(n));
    }
    // A condition for conditional nodes of this graph.
    detail::ret<cw_cond_handle> cond_create(unsigned default_value, unsigned flags = CW_COND_RESET_EACH_LAUNCH) const {
        cw_cond_handle h = 0;
        cw_status s = cw_graph_add_cond_handle(get(), default_value, flags, &h);
        return detail::make(s, std::move(h));
    }
    // A WHILE node (or IF, by settings) on `h` after deps; returns its body
    // (borrowed: it lives with this graph).
    detail::ret<graph> add_conditional(cw_cond_handle h, cw_cond_type type, cw_graph_node *const *deps = nullptr,
                                       size_t ndeps = 0) const {
        cw_cond_settings cs;
        cw_cond_settings_default(&cs);
        cs.type = type;
        cw_graph *body = nullptr;
        cw_status s = cw_graph_add_conditional(get(), h, &cs, deps, ndeps, nullptr, &body, nullptr);
        return detail::make(s, graph::borrow(body));
    }
    // The last node (sink), when there is exactly one; nullptr otherwise.
    cw_graph_node *sink() const noexcept {
        cw_graph_node *n = nullptr;
        size_t count = 0;
        if (cw_graph_get_sinks(get(), &n, 1, &count) != CW_SUCCESS || count != 1) return nullptr;
        return n;
    }
};

class graph_exec : public detail::handle<graph_exec, cw_graph_exec, cw_graph_exec_destroy> {
  public:
    using handle::handle;
    static detail::ret<graph_exec> create(const graph &g, unsigned flags = 0) {
        cw_graph_exec *e = nullptr;
        cw_status s = cw_graph_instantiate(&e, g.get(), flags);
        return detail::make(s, graph_exec(e, true));
    }
    detail::void_ret upload(const stream &s) const { return detail::done(cw_graph_exec_upload(get(), s.get())); }
    detail::void_ret launch(const stream &s) const { return detail::done(cw_graph_exec_launch(get(), s.get())); }
    // Runs g from the next launch: in place, or instantiated again (the result says which).
    detail::ret<cw_graph_update_info> update(const graph &g) const {
        cw_graph_update_info i{};
        cw_status s = cw_graph_exec_update(get(), g.get(), &i);
        return detail::make(s, std::move(i));
    }
    // The driver exec, the context and the counters.
    cw_graph_exec_info info() const noexcept {
        cw_graph_exec_info i{};
        (void)cw_graph_exec_get_info(get(), &i);
        return i;
    }
    // The driver exec (borrowed: valid until destroyed or re-instantiated by update).
    CUgraphExec native() const noexcept { return info().handle; }
    // The exec's context, borrowed.
    cw::context context() const noexcept { return cw::context::borrow(info().context); }
};

// Captures the work enqueued on a stream while it lives (RAII): begin in the
// constructor (check ok()), end() to get the graph. A capture still open
// when the object goes is ended and dropped, never left behind.
class capture {
  public:
    explicit capture(const stream &s, cw_capture_mode mode = CW_CAPTURE_GLOBAL) noexcept
        : s_(s.get()), begun_(cw_capture_begin(s_, nullptr, mode)) {}
    // Into an existing graph (a conditional body, say); end() returns it borrowed.
    capture(const stream &s, const graph &into, cw_capture_mode mode = CW_CAPTURE_GLOBAL) noexcept
        : s_(s.get()), into_(into.get()), begun_(cw_capture_begin(s_, into_, mode)) {}
    ~capture() {
        if (open_()) {
            cw_graph *g = nullptr;
            if (cw_capture_end(&g, s_) == CW_SUCCESS && g && !into_) cw_graph_destroy(&g);
        }
    }
    capture(const capture &) = delete;
    capture &operator=(const capture &) = delete;
    // Whether the capture began (CW_SUCCESS) or why not.
    cw_status began() const noexcept { return begun_; }
    detail::ret<graph> end() {
        if (begun_ != CW_SUCCESS) return detail::make(begun_, graph());
        ended_ = true;
        cw_graph *g = nullptr;
        cw_status s = cw_capture_end(&g, s_);
        return detail::make(s, into_ ? graph::borrow(into_) : graph(g, true));
    }

  private:
    bool open_() const noexcept { return begun_ == CW_SUCCESS && !ended_; }
    cw_stream *s_;
    cw_graph *into_ = nullptr;
    cw_status begun_;
    bool ended_ = false;
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_GRAPH_HPP
