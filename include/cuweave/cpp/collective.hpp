/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/collective.h: cw::nccl_version, cw::comm_id_generate,
// cw::comm, cw::comm_group.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_COLLECTIVE_HPP
#define CUWEAVE_CPP_COLLECTIVE_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/multi.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- collectives (NCCL) -------------------------------------------------------------

// A new id for a communicator by rank (cw_comm_id_generate): made in one
// process, handed to the others as its bytes.
inline detail::ret<cw_comm_id> comm_id_generate() {
    cw_comm_id id{};
    cw_status s = cw_comm_id_generate(&id);
    return detail::make(s, std::move(id));
}

// A communicator: one NCCL rank per context, rank i on ctxs[i] (primary
// contexts, one per device); destroyed (cw_comm_destroy) after the work
// already enqueued when the wrapper goes.
class comm : public detail::handle<comm, cw_comm, cw_comm_destroy> {
  public:
    using handle::handle;
    // Rank i on ctxs[i] ...
    static detail::ret<comm> create(cw_context *const *ctxs, int n) {
        cw_comm *c = nullptr;
        cw_status s = cw_comm_create(&c, ctxs, n);
        return detail::make(s, comm(c, true));
    }
    // ... on the contexts given (create(ctx0, ctx1)) ...
    template <class... C, class = typename std::enable_if<detail::all_are<cw::context, C...>::value>::type>
    static detail::ret<comm> create(const cw::context &first, const C &...rest) {
        cw_context *const v[] = {first.get(), rest.get()...};
        return create(v, static_cast<int>(1 + sizeof...(C)));
    }
    // ... or on a device group's members (rank i: member i).
    static detail::ret<comm> create(const device_group &group) {
        const cw_device_group_info g = group.info();
        return create(g.contexts, g.count);
    }
    // This process's rank of nranks, joined by id across processes
    // (cw_comm_create_rank: CW_ERROR_TIMEOUT when a rank does not come within
    // timeout_ms).
    static detail::ret<comm> create_rank(const cw::context &ctx, const cw_comm_id &id, int nranks, int rank,
                                         uint32_t timeout_ms) {
        cw_comm *c = nullptr;
        cw_status s = cw_comm_create_rank(&c, ctx.get(), &id, nranks, rank, timeout_ms);
        return detail::make(s, comm(c, true));
    }
    // The common bootstrap (cw_comm_bootstrap): the rank, world size and
    // rank 0's file or address from the settings, else the environment
    // (CUWEAVE_RANK, CUWEAVE_WORLD_SIZE, CUWEAVE_COMM_FILE or
    // CUWEAVE_COMM_ADDR).
    static detail::ret<comm> bootstrap(const cw::context &ctx,
                                       const cw_comm_bootstrap_settings &s = defaults<cw_comm_bootstrap_settings>()) {
        cw_comm *c = nullptr;
        cw_status st = cw_comm_bootstrap(&c, ctx.get(), &s);
        return detail::make(st, comm(c, true));
    }

    // The ranks and their contexts (cw_comm_get_info; zeroed for an empty
    // wrapper).
    cw_comm_info info() const noexcept {
        cw_comm_info i{};
        (void)cw_comm_get_info(get(), &i);
        return i;
    }
    // The number of ranks, in every process (0 for an empty wrapper).
    int size() const noexcept { return info().size; }
    // The ranks held here (size() for create, 1 for create_rank) and the
    // global rank of the first.
    int local_size() const noexcept { return info().local_size; }
    int first_rank() const noexcept { return info().first_rank; }
    // Global rank `rank`'s context, borrowed (empty for a rank out of range
    // or held by another process).
    cw::context context(int rank) const noexcept {
        const cw_comm_info i = info();
        const int local = rank - i.first_rank;
        return cw::context::borrow(local >= 0 && local < i.local_size ? i.contexts[local] : nullptr);
    }
    // Every local rank at once (arrays of local_size() entries, one NCCL
    // group): recv[i] gets op over every rank's send (send[i] == recv[i]: in
    // place), on streams[i].
    detail::void_ret all_reduce(const cw_devptr *send, const cw_devptr *recv, size_t count, cw_dtype dtype,
                                cw_reduce_op op, cw_stream *const *streams) const {
        return detail::done(cw_comm_all_reduce(get(), send, recv, count, dtype, op, streams));
    }
    // Every recv[i] gets the root's send (root a global rank; only the
    // root's entry, send[root - first_rank()], is read).
    detail::void_ret broadcast(const cw_devptr *send, const cw_devptr *recv, size_t count, cw_dtype dtype, int root,
                               cw_stream *const *streams) const {
        return detail::done(cw_comm_broadcast(get(), send, recv, count, dtype, root, streams));
    }
    // One rank's part (a global rank held here): from that rank's own
    // thread, or for several ranks inside a cw::comm_group (else NCCL
    // deadlocks).
    detail::void_ret all_reduce_rank(int rank, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype,
                                     cw_reduce_op op, const stream &s) const {
        return detail::done(cw_comm_all_reduce_rank(get(), rank, send, recv, count, dtype, op, s.get()));
    }
    detail::void_ret broadcast_rank(int rank, cw_devptr send, cw_devptr recv, size_t count, cw_dtype dtype, int root,
                                    const stream &s) const {
        return detail::done(cw_comm_broadcast_rank(get(), rank, send, recv, count, dtype, root, s.get()));
    }
};

// An NCCL group on this thread (cw_comm_group_begin / cw_comm_group_end): the
// _rank calls made while it is open are issued together at end(), or in the
// destructor (which drops NCCL's error: call end() to see it). End it on the
// thread that began it; groups nest.
class comm_group {
  public:
    comm_group() noexcept = default;
    static detail::ret<comm_group> begin() {
        cw_status s = cw_comm_group_begin();
        return detail::make(s, comm_group(s == CW_SUCCESS));
    }
    ~comm_group() { end_(); }
    comm_group(const comm_group &) = delete;
    comm_group &operator=(const comm_group &) = delete;
    comm_group(comm_group &&o) noexcept : open_(o.open_) { o.open_ = false; }
    comm_group &operator=(comm_group &&o) noexcept {
        if (this != &o) {
            end_();
            open_ = o.open_;
            o.open_ = false;
        }
        return *this;
    }
    explicit operator bool() const noexcept { return open_; }
    // Ends the group now (issues its calls); the group is closed whatever
    // NCCL answers. Nothing to do for a group already ended.
    detail::void_ret end() {
        if (!open_) return detail::done(CW_SUCCESS);
        open_ = false;
        return detail::done(cw_comm_group_end());
    }

  private:
    explicit comm_group(bool open) noexcept : open_(open) {}
    void end_() noexcept {
        if (open_) (void)cw_comm_group_end();
        open_ = false;
    }
    bool open_ = false;
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_COLLECTIVE_HPP
