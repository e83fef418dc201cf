/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/partition.h: cw::partition_caps, cw::partition_group.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_PARTITION_HPP
#define CUWEAVE_CPP_PARTITION_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- partitions ---------------------------------------------------------------

// What device `device` offers for green contexts (supported 0: none).
inline detail::ret<cw_partition_caps> partition_caps(int device) {
    cw_partition_caps c{};
    cw_status s = cw_partition_get_caps(device, &c);
    return detail::make(s, std::move(c));
}

// The group's partitions outlive it while objects made on them live (the
// wrappers of streams made on a partition may go after the group's).
class partition_group : public detail::handle<partition_group, cw_partition_group, cw_partition_group_destroy> {
  public:
    using handle::handle;
    static detail::ret<partition_group> create(int device, const unsigned *sm_counts, size_t n, int default_index) {
        cw_partition_group *p = nullptr;
        cw_status s = cw_partition_group_create(&p, device, sm_counts, n, default_index);
        return detail::make(s, partition_group(p, true));
    }
    // Count, default index, device.
    detail::ret<cw_partition_group_info> group_info() const {
        cw_partition_group_info i{};
        cw_status s = cw_partition_group_get_info(get(), &i);
        return detail::make(s, std::move(i));
    }
    size_t size() const noexcept {
        cw_partition_group_info i{};
        (void)cw_partition_group_get_info(get(), &i);
        return i.count;
    }
    // A partition as a borrowed context (valid while the group lives).
    context at(size_t index) const noexcept {
        cw_partition_info i{};
        (void)cw_partition_group_get_partition(get(), index, &i);
        return context::borrow(i.context);
    }
    context default_partition() const noexcept {
        cw_partition_group_info g{};
        (void)cw_partition_group_get_info(get(), &g);
        return at(g.default_index);
    }
    unsigned sm_count(size_t index) const noexcept {
        cw_partition_info i{};
        (void)cw_partition_group_get_partition(get(), index, &i);
        return i.sm_count;
    }
    detail::ret<cw_partition_info> info(size_t index) const {
        cw_partition_info i{};
        cw_status s = cw_partition_group_get_partition(get(), index, &i);
        return detail::make(s, std::move(i));
    }
};

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_PARTITION_HPP
