/* SPDX-License-Identifier: BSD-2-Clause */
// C++ wrappers of cuweave/multi.h: cw::device_group, peer access and copies,
// cw::share_buffer_pool.
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_MULTI_HPP
#define CUWEAVE_CPP_MULTI_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {
inline namespace v0_3 {
inline namespace CW_HPP_MODE {

// ---- several devices -------------------------------------------------------------

// The primary contexts of a list of devices (cw_device_group_create), or of
// every visible one; destroyed (cw_device_group_destroy) in the destructor.
// Objects made on its contexts keep them alive past the group.
class device_group : public detail::handle<device_group, cw_device_group, cw_device_group_destroy> {
  public:
    using handle::handle;
    // Member i is devices[i] (count 0 and devices nullptr: every device) ...
    static detail::ret<device_group> create(const int *devices, int count) {
        cw_device_group *d = nullptr;
        cw_status s = cw_device_group_create(&d, devices, count);
        return detail::make(s, device_group(d, true));
    }
    // ... or the devices listed (create({0, 1}); an empty list: every device) ...
    static detail::ret<device_group> create(std::initializer_list<int> devices) {
        return create(devices.size() ? devices.begin() : nullptr, static_cast<int>(devices.size()));
    }
    // ... or every visible device, in ordinal order.
    static detail::ret<device_group> create() { return create(nullptr, 0); }

    // The members, their ordinals and contexts (cw_device_group_get_info;
    // zeroed for an empty wrapper).
    cw_device_group_info info() const noexcept {
        cw_device_group_info i{};
        (void)cw_device_group_get_info(get(), &i);
        return i;
    }
    int size() const noexcept { return info().count; }
    // Member i's context, borrowed (valid while the group lives; empty for an
    // index out of range).
    cw::context context(int i) const noexcept {
        const cw_device_group_info g = info();
        return cw::context::borrow(i >= 0 && i < g.count ? g.contexts[i] : nullptr);
    }
    // Member i's device ordinal (-1 for an index out of range).
    int ordinal(int i) const noexcept {
        const cw_device_group_info g = info();
        return i >= 0 && i < g.count ? g.devices[i] : -1;
    }
};

// What the topology allows from device to peer (ordinals; device == peer:
// can_access 1).
inline detail::ret<cw_peer_info> peer_info(int device, int peer) {
    cw_peer_info i{};
    cw_status s = cw_device_get_peer_info(device, peer, &i);
    return detail::make(s, std::move(i));
}
// Lets ctx's device access peer's device's memory (one direction,
// idempotent; CW_ERROR_INVALID_ARGUMENT for two contexts of one device).
inline detail::void_ret enable_peer(const context &ctx, const context &peer) {
    return detail::done(cw_context_enable_peer(ctx.get(), peer.get()));
}
// Copies bytes from src (memory of src_ctx's device) to dst (of dst_ctx's) on
// s, a stream of either device (cuMemcpyPeerAsync). buffer::copy_from copies
// whole buffers.
inline detail::void_ret copy_peer(const stream &s, cw_devptr dst, const context &dst_ctx, cw_devptr src,
                                  const context &src_ctx, size_t bytes) {
    return detail::done(cw_copy_peer(s.get(), dst, dst_ctx.get(), src, src_ctx.get(), bytes));
}
// Opens owner's buffer pool to kernels on peer's device (and enables peer
// access from peer to owner; CW_ERROR_INVALID_ARGUMENT on one device).
inline detail::void_ret share_buffer_pool(const context &owner, const context &peer) {
    return detail::done(cw_context_share_buffer_pool(owner.get(), peer.get()));
}

}  // namespace CW_HPP_MODE
}  // namespace v0_3
}  // namespace cw

#endif  // CUWEAVE_CPP_MULTI_HPP
