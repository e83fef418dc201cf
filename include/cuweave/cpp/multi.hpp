// C++ wrappers of cuweave/multi.h: cw::device_set, peer access and copies,
// cw::pool_share, several resident loops (data_ready_many, wait_many).
// Part of cuweave/cuweave.hpp (include that one): its top comment tells the rules.
#ifndef CUWEAVE_CPP_MULTI_HPP
#define CUWEAVE_CPP_MULTI_HPP

#include "cuweave/cpp/context.hpp"
#include "cuweave/cpp/core.hpp"
#include "cuweave/cpp/resident.hpp"
#include "cuweave/cpp/stream.hpp"

namespace cw {

// ---- several devices -------------------------------------------------------------

// The primary contexts of a list of devices (cw_device_set_open), or of every
// visible one; closed (cw_device_set_close) in the destructor. Objects made
// on its contexts keep them alive past the set.
class device_set : public detail::handle<cw_device_set, cw_device_set_close> {
  public:
    using handle::handle;
    // Member i is devices[i] (count 0 and devices nullptr: every device) ...
    static detail::ret<device_set> open(const int *devices, int count) {
        cw_device_set *d = nullptr;
        cw_status s = cw_device_set_open(&d, devices, count);
        return detail::make(s, device_set(d, true));
    }
    // ... or the devices listed (open({0, 1}); an empty list: every device) ...
    static detail::ret<device_set> open(std::initializer_list<int> devices) {
        return open(devices.size() ? devices.begin() : nullptr, static_cast<int>(devices.size()));
    }
    // ... or every visible device, in ordinal order.
    static detail::ret<device_set> open() { return open(nullptr, 0); }
    // Borrows a cw_device_set: never closed.
    static device_set wrap(cw_device_set *d) noexcept { return device_set(d, false); }

    int size() const noexcept {
        int n = 0;
        (void)cw_device_set_size(get(), &n);
        return n;
    }
    // Member i's context, borrowed (valid while the set lives; empty for an
    // index out of range).
    cw::context context(int i) const noexcept {
        cw_context *c = nullptr;
        (void)cw_device_set_context(get(), i, &c);
        return cw::context::wrap(c);
    }
    // Member i's device ordinal (-1 for an index out of range).
    int ordinal(int i) const noexcept {
        int d = -1;
        (void)cw_device_set_ordinal(get(), i, &d);
        return d;
    }
    // Enables peer access between every ordered pair of members the topology
    // allows; returns how many ordered pairs have it.
    detail::ret<int> enable_peers() const {
        int n = 0;
        cw_status s = cw_device_set_enable_peers(get(), &n);
        return detail::make(s, std::move(n));
    }
};

// What the topology allows from device to peer (ordinals; device == peer:
// can_access 1).
inline detail::ret<cw_peer_info> peer_info(int device, int peer) {
    cw_peer_info i{};
    cw_status s = cw_device_get_peer_info(device, peer, &i);
    return detail::make(s, std::move(i));
}
// Lets ctx's device access peer's device's memory (one direction;
// CW_ERROR_INVALID_ARGUMENT for two contexts of one device).
inline detail::void_ret enable_peer(const context &ctx, const context &peer) {
    return detail::done(cw_context_enable_peer(ctx.get(), peer.get()));
}
// Whether enable_peer(ctx, peer) was done in this process (true for one device).
inline detail::ret<bool> peer_enabled(const context &ctx, const context &peer) {
    int e = 0;
    cw_status s = cw_context_peer_enabled(ctx.get(), peer.get(), &e);
    return detail::make(s, e != 0);
}
// Copies bytes from src (memory of src_ctx's device) to dst (of dst_ctx's) on
// s, a stream of either device (cuMemcpyPeerAsync). buffer::copy_from copies
// whole buffers.
inline detail::void_ret copy_peer(const stream &s, unsigned long long dst, const context &dst_ctx,
                                  unsigned long long src, const context &src_ctx, size_t bytes) {
    return detail::done(cw_copy_peer(s.get(), dst, dst_ctx.get(), src, src_ctx.get(), bytes));
}
// Opens owner's buffer pool to kernels on peer's device (and enables peer
// access from peer to owner; CW_ERROR_INVALID_ARGUMENT on one device).
inline detail::void_ret pool_share(const context &owner, const context &peer) {
    return detail::done(cw_buffer_pool_share(owner.get(), peer.get()));
}

// Several resident loops from one thread: rings each doorbell once, in order
// (seqs, may be nullptr, gets the request numbers) ...
inline detail::void_ret data_ready_many(cw_resident *const *loops, size_t n, uint64_t *seqs = nullptr) {
    return detail::done(cw_resident_data_ready_many(loops, n, seqs));
}
// ... or for the loops given (data_ready_many(a, b)): their request numbers, in order.
template <class... R, class = typename std::enable_if<detail::all_are<resident, R...>::value>::type>
inline detail::ret<std::array<uint64_t, 1 + sizeof...(R)>> data_ready_many(const resident &first,
                                                                          const R &...rest) {
    cw_resident *const v[] = {first.get(), rest.get()...};
    std::array<uint64_t, 1 + sizeof...(R)> seqs{};
    cw_status s = cw_resident_data_ready_many(v, 1 + sizeof...(R), seqs.data());
    return detail::make(s, std::move(seqs));
}
// Waits until each loops[i] has finished request seqs[i], all within one
// timeout ...
inline detail::void_ret wait_many(cw_resident *const *loops, const uint64_t *seqs, size_t n, uint32_t timeout_ms) {
    return detail::done(cw_resident_wait_many(loops, seqs, n, timeout_ms));
}
// ... or for the loops given, with what data_ready_many(a, b) returned:
// wait_many(seqs, timeout_ms, a, b).
template <size_t N, class... R, class = typename std::enable_if<detail::all_are<resident, R...>::value>::type>
inline detail::void_ret wait_many(const std::array<uint64_t, N> &seqs, uint32_t timeout_ms, const R &...loops) {
    static_assert(sizeof...(R) == N, "wait_many: one request number per loop");
    cw_resident *const v[] = {loops.get()..., nullptr};
    return detail::done(cw_resident_wait_many(v, seqs.data(), N, timeout_ms));
}

}  // namespace cw

#endif  // CUWEAVE_CPP_MULTI_HPP
