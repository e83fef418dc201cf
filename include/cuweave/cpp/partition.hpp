// C++ wrappers of cuweave/partition.h: cw::green_query, cw::partition_set.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_PARTITION_HPP
#define CUWEAVE_CPP_PARTITION_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"

namespace cw {

// ---- partitions ---------------------------------------------------------------

// What device `device` offers for green contexts (supported 0: none).
inline detail::ret<cw_green_caps> green_query(int device) {
    cw_green_caps c{};
    cw_status s = cw_green_query(device, &c);
    return detail::make(s, std::move(c));
}

namespace detail {
inline void destroy_partition_set(cw_partition_set **s) {
    // Refused while objects live on its partitions: destroy those first (the
    // wrappers of streams made on a partition must go before the set's).
    (void)cw_partition_set_destroy(s);
}
}  // namespace detail

class partition_set : public detail::handle<cw_partition_set, detail::destroy_partition_set> {
  public:
    using handle::handle;
    static detail::ret<partition_set> create(int device, const unsigned *sm_counts, size_t n, int default_index) {
        cw_partition_set *p = nullptr;
        cw_status s = cw_partition_set_create(&p, device, sm_counts, n, default_index);
        return detail::make(s, partition_set(p, true));
    }
    size_t size() const noexcept {
        size_t n = 0;
        (void)cw_partition_set_count(get(), &n);
        return n;
    }
    // A partition as a borrowed context (lives with the set).
    context at(size_t index) const noexcept {
        cw_context *c = nullptr;
        (void)cw_partition_set_get(get(), index, &c);
        return context::wrap(c);
    }
    context default_partition() const noexcept {
        cw_context *c = nullptr;
        (void)cw_partition_set_default(get(), &c);
        return context::wrap(c);
    }
    unsigned sm_count(size_t index) const noexcept {
        cw_partition_info i{};
        (void)cw_partition_set_info(get(), index, &i);
        return i.sm_count;
    }
    detail::ret<cw_partition_info> info(size_t index) const {
        cw_partition_info i{};
        cw_status s = cw_partition_set_info(get(), index, &i);
        return detail::make(s, std::move(i));
    }
    // The SM ids of a partition: up to cap into ids; returns how many there
    // are (CUDA 13.0 cannot say: CW_ERROR_NOT_SUPPORTED).
    detail::ret<size_t> sm_ids(size_t index, unsigned *ids, size_t cap) const {
        size_t n = 0;
        cw_status s = cw_partition_set_sm_ids(get(), index, ids, cap, &n);
        return detail::make(s, std::move(n));
    }
    // Work queues of its own for a partition (CW_ERROR_NOT_SUPPORTED on CUDA 13.0).
    detail::void_ret request_workqueues(size_t index, unsigned count) const {
        return detail::done(cw_partition_set_request_workqueues(get(), index, count));
    }
};

}  // namespace cw

#endif  // CUWEAVE_CPP_PARTITION_HPP
