// cuweave: header-only C++17 wrappers over the C API (no ABI of their own).
//
// Each wrapper is the C handle plus an ownership flag. Copies are deleted;
// moves transfer ownership (and leave the source empty). An owning wrapper
// destroys its handle in its destructor; `T::wrap(handle)` makes a borrowed
// wrapper that never destroys it. Destructors never throw.
//
// Errors: by default a failing call throws cw::error, which carries the
// cw_status and the library's detail message. Built with -fno-exceptions (or
// with CW_HPP_NO_EXCEPTIONS defined), the same calls return cw::result<T>
// (or cw::status) instead, which the caller checks.
//
// Covers every function of the public C API (docs/cpp.md has the table):
// the library (versions, init, devices, errors, the log), contexts,
// partitions, streams (fork scopes, ordering), pools and leases, timers,
// futures (callbacks, fds, when_all), graphs, executable graphs, captures,
// the resident loop, programs, modules, kernels (with a typed launch), the
// jit cache, buffers, page-locked host memory and copies, several devices
// (device sets, peer access, peer copies, pools shared with peers, several
// resident loops at once), NCCL collectives (communicators, groups), and
// operators and pipelines (a base class for operator authors). Settings
// stay the C structs: cw::defaults<cw_..._settings>() gives one filled with
// defaults.
// There is no event wrapper: the C API has no public event object (ordering
// is stream to stream: stream::wait, wait_all, cw::forked).
#ifndef CUWEAVE_CUWEAVE_HPP
#define CUWEAVE_CUWEAVE_HPP

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuweave/cuweave.h"

#if !defined(CW_HPP_NO_EXCEPTIONS) && !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#define CW_HPP_NO_EXCEPTIONS 1
#endif
#ifndef CW_HPP_NO_EXCEPTIONS
#include <exception>
#endif

namespace cw {

// ---- errors -----------------------------------------------------------------

#ifndef CW_HPP_NO_EXCEPTIONS
// A failed cuweave call: its status and the detail message of that failure.
class error : public std::exception {
  public:
    error(cw_status status, std::string message) : status_(status), message_(std::move(message)) {}
    cw_status status() const noexcept { return status_; }
    const char *what() const noexcept override { return message_.c_str(); }

  private:
    cw_status status_;
    std::string message_;
};
#endif

// A status in no-exceptions mode; in exceptions mode calls return void.
class status {
  public:
    status(cw_status s = CW_SUCCESS) noexcept : s_(s) {}
    cw_status code() const noexcept { return s_; }
    bool ok() const noexcept { return s_ == CW_SUCCESS; }
    explicit operator bool() const noexcept { return ok(); }
    const char *name() const noexcept { return cw_status_name(s_); }
    // A short English description ("the wait timed out").
    const char *description() const noexcept { return cw_status_string(s_); }

  private:
    cw_status s_;
};

// A value or the status that prevented it (no-exceptions mode).
template <class T>
class result {
  public:
    result(T value) noexcept(std::is_nothrow_move_constructible<T>::value) : value_(std::move(value)) {}
    result(cw_status s) noexcept : status_(s) {}
    bool ok() const noexcept { return status_ == CW_SUCCESS; }
    explicit operator bool() const noexcept { return ok(); }
    cw_status code() const noexcept { return status_; }
    T &value() & noexcept { return value_; }
    T &&value() && noexcept { return std::move(value_); }

  private:
    T value_{};
    cw_status status_ = CW_SUCCESS;
};

namespace detail {

#ifndef CW_HPP_NO_EXCEPTIONS
using void_ret = void;
template <class T>
using ret = T;
// The message is built only on failure.
inline void check(cw_status s) {
    if (s != CW_SUCCESS) throw error(s, cw_last_error_message());
}
inline void_ret done(cw_status s) { check(s); }
template <class T>
inline T make(cw_status s, T &&value) {
    check(s);
    return std::move(value);
}
#else
using void_ret = status;
template <class T>
using ret = result<T>;
inline void_ret done(cw_status s) { return status(s); }
template <class T>
inline result<T> make(cw_status s, T &&value) {
    if (s != CW_SUCCESS) return result<T>(s);
    return result<T>(std::move(value));
}
#endif

template <class... T>
struct all_trivially_copyable : std::true_type {};
template <class T, class... R>
struct all_trivially_copyable<T, R...>
    : std::integral_constant<bool, std::is_trivially_copyable<T>::value && all_trivially_copyable<R...>::value> {};

// The C handle plus ownership. Destroy is the C destroy function.
template <class H, void (*Destroy)(H **)>
class handle {
  public:
    handle() noexcept = default;
    handle(H *h, bool owned) noexcept : h_(h), owned_(owned) {}
    ~handle() { reset(); }
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    handle(handle &&o) noexcept : h_(o.h_), owned_(o.owned_) {
        o.h_ = nullptr;
        o.owned_ = false;
    }
    handle &operator=(handle &&o) noexcept {
        // Move-assign as reset(other.release()): self-move leaves it intact.
        if (this != &o) {
            bool owned = o.owned_;
            H *h = o.release();
            reset();
            h_ = h;
            owned_ = owned;
        }
        return *this;
    }
    H *get() const noexcept { return h_; }
    bool owns() const noexcept { return owned_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }
    // Gives up ownership; the caller destroys the handle.
    H *release() noexcept {
        H *h = h_;
        h_ = nullptr;
        owned_ = false;
        return h;
    }
    void reset() noexcept {
        if (h_ && owned_) Destroy(&h_);
        h_ = nullptr;
        owned_ = false;
    }

  private:
    H *h_ = nullptr;
    bool owned_ = false;
};

inline void destroy_partition_set(cw_partition_set **s) {
    // Refused while objects live on its partitions: destroy those first (the
    // wrappers of streams made on a partition must go before the set's).
    (void)cw_partition_set_destroy(s);
}

// What a C++ callback returned, as a cw_status: void is success.
inline cw_status to_cw_status(cw_status s) noexcept { return s; }
inline cw_status to_cw_status(const status &s) noexcept { return s.code(); }

// Calls f(args...) for the C library, which must never see an exception:
// a cw::error becomes its status, anything else CW_ERROR_INTERNAL.
template <class F, class... A>
inline cw_status call_for_c(F &f, A &&...args) noexcept {
#ifndef CW_HPP_NO_EXCEPTIONS
    try {
#endif
        if constexpr (std::is_void<decltype(f(std::forward<A>(args)...))>::value) {
            f(std::forward<A>(args)...);
            return CW_SUCCESS;
        } else {
            return to_cw_status(f(std::forward<A>(args)...));
        }
#ifndef CW_HPP_NO_EXCEPTIONS
    } catch (const error &e) {
        return e.status();
    } catch (...) {
        return CW_ERROR_INTERNAL;
    }
#endif
}

// Calls f(args...) where nothing can be returned to the C library (log and
// completion callbacks): an exception is swallowed.
template <class F, class... A>
inline void call_quietly(F &f, A &&...args) noexcept {
#ifndef CW_HPP_NO_EXCEPTIONS
    try {
#endif
        f(std::forward<A>(args)...);
#ifndef CW_HPP_NO_EXCEPTIONS
    } catch (...) {
    }
#endif
}

// A function object as the user pointer of a C callback.
template <class F>
inline void *user_ptr(F &f) noexcept {
    static_assert(!std::is_function<F>::value, "pass a function object, or a C function with its user pointer");
    return const_cast<void *>(static_cast<const void *>(&f));
}

template <class T, class... R>
struct all_are : std::true_type {};
template <class T, class U, class... R>
struct all_are<T, U, R...>
    : std::integral_constant<bool, std::is_same<T, typename std::decay<U>::type>::value && all_are<T, R...>::value> {};

}  // namespace detail

// ---- the library: versions, init, devices, errors, the log -------------------

// The library's release and ABI versions (CW_VERSION_PACK form): compare with
// CW_VERSION_PACK(CW_VERSION_MAJOR, ...) to detect a header/library mismatch.
inline unsigned version() noexcept { return cw_version(); }
inline unsigned version_api() noexcept { return cw_version_api(); }

// Loads and initialises the driver (optional: every call that needs it does).
inline detail::void_ret init() { return detail::done(cw_init()); }

// The driver's CUDA version (13000 for 13.0).
inline detail::ret<int> driver_version() {
    int v = 0;
    cw_status s = cw_driver_version(&v);
    return detail::make(s, std::move(v));
}

// Whether the loaded driver has an optional feature (false without a driver).
inline bool driver_has(cw_feature feature) noexcept { return cw_driver_has(feature) != 0; }

inline detail::ret<int> device_count() {
    int n = 0;
    cw_status s = cw_device_count(&n);
    return detail::make(s, std::move(n));
}

// Facts about device ordinal `device` (no context is made).
inline detail::ret<cw_device_info> device_info(int device) {
    cw_device_info i{};
    cw_status s = cw_device_get_info(device, &i);
    return detail::make(s, std::move(i));
}

// A stream priority range: least (the default, 0) and greatest (e.g. -5).
struct priority_range {
    int least = 0;
    int greatest = 0;
};

inline detail::ret<priority_range> device_priority_range(int device) {
    priority_range r;
    cw_status s = cw_device_get_priority_range(device, &r.least, &r.greatest);
    return detail::make(s, std::move(r));
}

// What device `device` offers for green contexts (supported 0: none).
inline detail::ret<cw_green_caps> green_query(int device) {
    cw_green_caps c{};
    cw_status s = cw_green_query(device, &c);
    return detail::make(s, std::move(c));
}

// The calling thread's detail of its last failed call (status CW_SUCCESS and
// empty strings when none failed); valid until the next failure or clear_error.
inline const cw_error_info &error_detail() noexcept { return *cw_last_error(); }
inline const char *error_message() noexcept { return cw_last_error_message(); }
inline void clear_error() noexcept { cw_clear_error(); }
inline const char *status_name(cw_status s) noexcept { return cw_status_name(s); }
inline const char *status_string(cw_status s) noexcept { return cw_status_string(s); }

// The process-wide log callback: a C function and its user pointer (fn
// nullptr removes it), messages up to max_level.
inline detail::void_ret set_log_callback(cw_log_fn fn, void *user, cw_log_level max_level) {
    return detail::done(cw_set_log_callback(fn, user, max_level));
}
// ... or a function object called as f(cw_log_level, const char *message). It
// is used by reference: it must outlive its installation (remove it with
// remove_log_callback() first). Exceptions it throws are dropped.
template <class F>
inline detail::void_ret set_log_callback(F &f, cw_log_level max_level = CW_LOG_WARNING) {
    struct tramp {
        static void call(void *user, cw_log_level level, const char *message) noexcept {
            detail::call_quietly(*static_cast<F *>(user), level, message);
        }
    };
    return detail::done(cw_set_log_callback(&tramp::call, detail::user_ptr(f), max_level));
}
inline void remove_log_callback() noexcept { (void)cw_set_log_callback(nullptr, nullptr, CW_LOG_ERROR); }

// ---- settings -------------------------------------------------------------------

// A C settings struct filled with its defaults (the *_settings_default call):
//   auto s = cw::defaults<cw_pipeline_settings>(); s.threads = 2;
template <class S>
S defaults() noexcept;
#define CW_HPP_DEFAULTS_(type, fn)          \
    template <>                            \
    inline type defaults<type>() noexcept { \
        type s;                            \
        fn(&s);                            \
        return s;                          \
    }
CW_HPP_DEFAULTS_(cw_stream_settings, cw_stream_settings_default)
CW_HPP_DEFAULTS_(cw_stream_pool_settings, cw_stream_pool_settings_default)
CW_HPP_DEFAULTS_(cw_cond_settings, cw_cond_settings_default)
CW_HPP_DEFAULTS_(cw_program_settings, cw_program_settings_default)
CW_HPP_DEFAULTS_(cw_jit_cache_settings, cw_jit_cache_settings_default)
CW_HPP_DEFAULTS_(cw_launch_config, cw_launch_config_default)
CW_HPP_DEFAULTS_(cw_resident_settings, cw_resident_settings_default)
CW_HPP_DEFAULTS_(cw_port_settings, cw_port_settings_default)
CW_HPP_DEFAULTS_(cw_operator_settings, cw_operator_settings_default)
CW_HPP_DEFAULTS_(cw_pipeline_settings, cw_pipeline_settings_default)
#undef CW_HPP_DEFAULTS_

// ---- contexts ---------------------------------------------------------------

class context : public detail::handle<cw_context, cw_context_destroy> {
  public:
    using handle::handle;
    // The primary context of `device`, retained.
    static detail::ret<context> create(int device) {
        cw_context *c = nullptr;
        cw_status s = cw_context_create(&c, device);
        return detail::make(s, context(c, true));
    }
    // A cw_context around a CUcontext the caller owns (the CUcontext is never
    // destroyed; the cw wrapper object is, when this wrapper goes).
    static detail::ret<context> adopt(CUcontext cu) {
        cw_context *c = nullptr;
        cw_status s = cw_context_wrap(&c, cu);
        return detail::make(s, context(c, true));
    }
    // Borrows a cw_context (a partition's, for instance): never destroyed.
    static context wrap(cw_context *c) noexcept { return context(c, false); }

    int device() const noexcept {
        int d = -1;
        (void)cw_context_get_device(get(), &d);
        return d;
    }
    cw_context_kind kind() const noexcept {
        cw_context_kind k = CW_CONTEXT_PRIMARY;
        (void)cw_context_get_kind(get(), &k);
        return k;
    }
    CUcontext native() const noexcept {
        CUcontext c = nullptr;
        (void)cw_context_get_handle(get(), &c);
        return c;
    }
    // The stream priority range of the context.
    detail::ret<cw::priority_range> priority_range() const {
        cw::priority_range r;
        cw_status s = cw_context_get_priority_range(get(), &r.least, &r.greatest);
        return detail::make(s, std::move(r));
    }
    detail::void_ret synchronize() const { return detail::done(cw_context_synchronize(get())); }
};

// ---- partitions ---------------------------------------------------------------

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

// ---- streams ------------------------------------------------------------------

class stream : public detail::handle<cw_stream, cw_stream_destroy> {
  public:
    using handle::handle;
    static detail::ret<stream> create(const cw::context &ctx, const cw_stream_settings *settings = nullptr) {
        cw_stream *st = nullptr;
        cw_status s = cw_stream_create(&st, ctx.get(), settings);
        return detail::make(s, stream(st, true));
    }
    // A cw_stream around a CUstream the caller owns (NULL = the legacy stream).
    static detail::ret<stream> adopt(const cw::context &ctx, CUstream cu) {
        cw_stream *st = nullptr;
        cw_status s = cw_stream_wrap(&st, ctx.get(), cu);
        return detail::make(s, stream(st, true));
    }
    // Borrows a cw_stream (a pool's, for instance): never destroyed.
    static stream wrap(cw_stream *s) noexcept { return stream(s, false); }

    CUstream native() const noexcept {
        CUstream s = nullptr;
        (void)cw_stream_get_handle(get(), &s);
        return s;
    }
    // The device ordinal (-1 for an empty wrapper). No driver call.
    int device() const noexcept {
        int d = -1;
        (void)cw_stream_get_device(get(), &d);
        return d;
    }
    // The stream's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_stream_get_context(get(), &c);
        return cw::context::wrap(c);
    }
    // Priority and flags as the driver reports them, and where it came from.
    detail::ret<cw_stream_info> info() const {
        cw_stream_info i{};
        cw_status s = cw_stream_get_info(get(), &i);
        return detail::make(s, std::move(i));
    }
    // Whether the stream takes part in a capture (as the driver sees it).
    detail::ret<cw_capture_state> capture_state() const {
        cw_capture_state c = CW_CAPTURE_NONE;
        cw_status s = cw_capture_get_state(get(), &c);
        return detail::make(s, std::move(c));
    }
    // Work enqueued on *this from now on waits for `src`'s work so far.
    detail::void_ret wait(const stream &src) const { return detail::done(cw_stream_wait(get(), src.get())); }
    // ... for each of the streams given (wait_all(a, b, c)), or of srcs[0..n-1].
    template <class... S, class = typename std::enable_if<detail::all_are<stream, S...>::value>::type>
    detail::void_ret wait_all(const S &...srcs) const {
        cw_stream *const v[] = {srcs.get()..., nullptr};
        return detail::done(cw_stream_wait_all(get(), v, sizeof...(S)));
    }
    detail::void_ret wait_all(cw_stream *const *srcs, size_t n) const {
        return detail::done(cw_stream_wait_all(get(), srcs, n));
    }
    detail::void_ret synchronize() const { return detail::done(cw_stream_synchronize(get())); }
    // True when all work is done (false: not yet); throws / returns the error otherwise.
    detail::ret<bool> done() const {
        cw_status s = cw_stream_query(get());
        return detail::make(s == CW_ERROR_NOT_READY ? CW_SUCCESS : s, s == CW_SUCCESS);
    }
};

// A fork scope (cw_stream_fork / cw_stream_join): child() is a stream whose
// work runs after everything enqueued on the parent before the fork; join()
// (or the destructor) makes the parent's later work wait for the child's and
// gives the child back (to the parent's lease pool, or the context's fork
// pool). Neither blocks the CPU. The parent must outlive the fork. A join
// that fails in the destructor (a device fault) is ignored.
class forked {
  public:
    forked() noexcept = default;
    static detail::ret<forked> create(const stream &parent) {
        cw_stream *c = nullptr;
        cw_status s = cw_stream_fork(parent.get(), &c);
        return detail::make(s, s == CW_SUCCESS ? forked(parent.get(), c) : forked());
    }
    ~forked() { (void)join_(); }
    forked(const forked &) = delete;
    forked &operator=(const forked &) = delete;
    forked(forked &&o) noexcept : parent_(o.parent_), child_(o.child_) {
        o.parent_ = nullptr;
        o.child_ = nullptr;
    }
    forked &operator=(forked &&o) noexcept {
        if (this != &o) {
            (void)join_();
            parent_ = o.parent_;
            child_ = o.child_;
            o.parent_ = nullptr;
            o.child_ = nullptr;
        }
        return *this;
    }
    // The child stream (borrowed: valid until the join).
    stream child() const noexcept { return stream::wrap(child_); }
    stream parent() const noexcept { return stream::wrap(parent_); }
    explicit operator bool() const noexcept { return child_ != nullptr; }
    // Joins now; on failure the forked stays as it was (the destructor tries again).
    detail::void_ret join() {
        if (!parent_ || !child_) return detail::done(CW_SUCCESS);
        cw_status s = cw_stream_join(parent_, &child_);
        if (s == CW_SUCCESS) parent_ = nullptr;
        return detail::done(s);
    }

  private:
    forked(cw_stream *parent, cw_stream *child) noexcept : parent_(parent), child_(child) {}
    cw_status join_() noexcept {
        cw_status s = parent_ && child_ ? cw_stream_join(parent_, &child_) : CW_SUCCESS;
        parent_ = nullptr;
        child_ = nullptr;
        return s;
    }
    cw_stream *parent_ = nullptr;
    cw_stream *child_ = nullptr;
};

// A leased stream: given back to its pool when the lease goes.
class lease {
  public:
    lease() noexcept = default;
    lease(cw_stream_pool *pool, cw_stream *s) noexcept : pool_(pool), s_(s) {}
    ~lease() { reset(); }
    lease(const lease &) = delete;
    lease &operator=(const lease &) = delete;
    lease(lease &&o) noexcept : pool_(o.pool_), s_(o.s_) { o.pool_ = nullptr, o.s_ = nullptr; }
    lease &operator=(lease &&o) noexcept {
        if (this != &o) {
            reset();
            pool_ = o.pool_;
            s_ = o.s_;
            o.pool_ = nullptr;
            o.s_ = nullptr;
        }
        return *this;
    }
    stream get() const noexcept { return stream::wrap(s_); }
    cw_stream *native_handle() const noexcept { return s_; }
    explicit operator bool() const noexcept { return s_ != nullptr; }
    void reset() noexcept {
        if (pool_ && s_) (void)cw_stream_pool_release(pool_, &s_);
        pool_ = nullptr;
        s_ = nullptr;
    }

  private:
    cw_stream_pool *pool_ = nullptr;
    cw_stream *s_ = nullptr;
};

class stream_pool : public detail::handle<cw_stream_pool, cw_stream_pool_destroy> {
  public:
    using handle::handle;
    static detail::ret<stream_pool> create(const cw::context &ctx, const cw_stream_pool_settings *settings = nullptr) {
        cw_stream_pool *p = nullptr;
        cw_status s = cw_stream_pool_create(&p, ctx.get(), settings);
        return detail::make(s, stream_pool(p, true));
    }
    // A stream no one else holds, until the lease goes.
    detail::ret<lease> acquire() const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_acquire(get(), &s);
        return detail::make(st, st == CW_SUCCESS ? lease(get(), s) : lease());
    }
    // As acquire, waiting up to timeout_us (negative: forever) for a release
    // when the pool is exhausted (then CW_ERROR_TIMEOUT).
    detail::ret<lease> acquire_wait(int64_t timeout_us) const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_acquire_wait(get(), &s, timeout_us);
        return detail::make(st, st == CW_SUCCESS ? lease(get(), s) : lease());
    }
    // Round-robin / single pools: the next stream (borrowed).
    detail::ret<stream> next() const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_next(get(), &s);
        return detail::make(st, stream::wrap(s));
    }
    // The stream `owner` uses under `name`: the same (owner, name), the same
    // stream (borrowed: the pool keeps it until release_owner(owner)).
    detail::ret<stream> named(const void *owner, const char *name) const {
        cw_stream *s = nullptr;
        cw_status st = cw_stream_pool_named(get(), owner, name, &s);
        return detail::make(st, stream::wrap(s));
    }
    // Gives back every named stream of owner; returns how many.
    detail::ret<size_t> release_owner(const void *owner) const {
        size_t n = 0;
        cw_status st = cw_stream_pool_release_owner(get(), owner, &n);
        return detail::make(st, std::move(n));
    }
    cw_stream_pool_stats stats() const noexcept {
        cw_stream_pool_stats st{};
        (void)cw_stream_pool_get_stats(get(), &st);
        return st;
    }
    // The pool's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_stream_pool_get_context(get(), &c);
        return cw::context::wrap(c);
    }
};

// ---- timers and futures ---------------------------------------------------------

class timer : public detail::handle<cw_timer, cw_timer_destroy> {
  public:
    using handle::handle;
    static detail::ret<timer> create(const cw::context &ctx) {
        cw_timer *t = nullptr;
        cw_status s = cw_timer_create(&t, ctx.get());
        return detail::make(s, timer(t, true));
    }
    detail::void_ret start(const stream &s) const { return detail::done(cw_timer_start(get(), s.get())); }
    detail::void_ret stop(const stream &s) const { return detail::done(cw_timer_stop(get(), s.get())); }
    detail::ret<float> elapsed_ms() const {
        float ms = 0;
        cw_status s = cw_timer_elapsed_ms(get(), &ms);
        return detail::make(s, std::move(ms));
    }
    // The timer's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_timer_get_context(get(), &c);
        return cw::context::wrap(c);
    }
};

class future : public detail::handle<cw_future, cw_future_destroy> {
  public:
    using handle::handle;
    // Completes when the work enqueued on s so far is done.
    static detail::ret<future> create(const stream &s, cw_future_kind kind = CW_FUTURE_WRITE_VALUE) {
        cw_future *f = nullptr;
        cw_status st = cw_future_create(&f, s.get(), kind);
        return detail::make(st, future(f, true));
    }
    detail::void_ret wait(int64_t timeout_us = -1) const { return detail::done(cw_future_wait(get(), timeout_us)); }
    // True when complete, false when not yet; throws / returns device errors.
    detail::ret<bool> ready() const {
        cw_status s = cw_future_poll(get());
        return detail::make(s == CW_ERROR_NOT_READY ? CW_SUCCESS : s, s == CW_SUCCESS);
    }
    detail::void_ret rearm(const stream &s) const { return detail::done(cw_future_rearm(get(), s.get())); }
    // How long a WRITE_VALUE waiter spins before it sleeps (default 200 us).
    detail::void_ret set_spin(unsigned spin_us) const { return detail::done(cw_future_set_spin(get(), spin_us)); }
    // The completion callback, once per completion (set it again after a
    // rearm): a C function and its user pointer ...
    detail::void_ret set_callback(cw_future_fn fn, void *user) const {
        return detail::done(cw_future_set_callback(get(), fn, user));
    }
    // ... or a function object called as f(cw_status), used by reference (it
    // must outlive the completion). It runs on a driver or watcher thread, or
    // here when the future is complete already; the rules of future.h apply
    // (no waiting or enqueueing in it). Exceptions it throws are dropped.
    template <class F>
    detail::void_ret set_callback(F &f) const {
        struct tramp {
            static void call(void *user, cw_future *, cw_status st) noexcept {
                detail::call_quietly(*static_cast<F *>(user), st);
            }
        };
        return detail::done(cw_future_set_callback(get(), &tramp::call, detail::user_ptr(f)));
    }
    // An eventfd, readable once the future completes (owned by the future).
    detail::ret<int> fd() const {
        int f = -1;
        cw_status s = cw_future_get_fd(get(), &f);
        return detail::make(s, std::move(f));
    }
    // The context of the stream it was made on, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_future_get_context(get(), &c);
        return cw::context::wrap(c);
    }
};

// A future that completes when each of the streams has finished the work
// enqueued on it so far (all on one context): when_all(a, b, c), with a kind
// first if not CW_FUTURE_WRITE_VALUE, or an array of n streams.
inline detail::ret<future> when_all(cw_stream *const *streams, size_t n,
                                    cw_future_kind kind = CW_FUTURE_WRITE_VALUE) {
    cw_future *f = nullptr;
    cw_status st = cw_when_all(&f, streams, n, kind);
    return detail::make(st, future(f, true));
}
template <class... S, class = typename std::enable_if<detail::all_are<stream, S...>::value>::type>
inline detail::ret<future> when_all(cw_future_kind kind, const S &...streams) {
    cw_stream *const v[] = {streams.get()..., nullptr};
    return when_all(v, sizeof...(S), kind);
}
template <class... S, class = typename std::enable_if<detail::all_are<stream, S...>::value>::type>
inline detail::ret<future> when_all(const stream &first, const S &...rest) {
    cw_stream *const v[] = {first.get(), rest.get()..., nullptr};
    return when_all(v, 1 + sizeof...(S), CW_FUTURE_WRITE_VALUE);
}

// ---- graphs -------------------------------------------------------------------

class graph : public detail::handle<cw_graph, cw_graph_destroy> {
  public:
    using handle::handle;
    // An empty graph, to build from parts or to capture into.
    static detail::ret<graph> create(const cw::context &ctx) {
        cw_graph *g = nullptr;
        cw_status s = cw_graph_create(&g, ctx.get());
        return detail::make(s, graph(g, true));
    }
    // Borrows a cw_graph (the body of a conditional node): never destroyed.
    static graph wrap(cw_graph *g) noexcept { return graph(g, false); }

    cw_graph_info info() const noexcept {
        cw_graph_info i{};
        (void)cw_graph_get_info(get(), &i);
        return i;
    }
    // The driver graph (borrowed), for nodes cuweave has no call for.
    CUgraph native() const noexcept {
        CUgraph g = nullptr;
        (void)cw_graph_get_handle(get(), &g);
        return g;
    }
    // The graph's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_graph_get_context(get(), &c);
        return cw::context::wrap(c);
    }
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
        cw_status s = cw_graph_cond_create(get(), default_value, flags, &h);
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
        return detail::make(s, graph::wrap(body));
    }
    // The last node (sink), when there is exactly one; nullptr otherwise.
    cw_graph_node *sink() const noexcept {
        cw_graph_node *n = nullptr;
        size_t count = 0;
        if (cw_graph_get_sinks(get(), &n, 1, &count) != CW_SUCCESS || count != 1) return nullptr;
        return n;
    }
};

class graph_exec : public detail::handle<cw_graph_exec, cw_graph_exec_destroy> {
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
    cw_graph_exec_stats stats() const noexcept {
        cw_graph_exec_stats st{};
        (void)cw_graph_exec_get_stats(get(), &st);
        return st;
    }
    // The driver exec (borrowed: valid until destroyed or re-instantiated by update).
    CUgraphExec native() const noexcept {
        CUgraphExec e = nullptr;
        (void)cw_graph_exec_get_handle(get(), &e);
        return e;
    }
    // The exec's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_graph_exec_get_context(get(), &c);
        return cw::context::wrap(c);
    }
};

// Captures the work enqueued on a stream while it lives (RAII): begin in the
// constructor (check ok()), end() to get the graph. A capture still open
// when the object goes is ended and dropped, never left behind.
class capture {
  public:
    explicit capture(const stream &s, cw_capture_mode mode = CW_CAPTURE_GLOBAL) noexcept
        : s_(s.get()), begun_(cw_capture_begin(s_, mode)) {}
    // Into an existing graph (a conditional body, say); end() returns it borrowed.
    capture(const stream &s, const graph &into, cw_capture_mode mode = CW_CAPTURE_GLOBAL) noexcept
        : s_(s.get()), into_(into.get()), begun_(cw_capture_begin_to(s_, into_, mode)) {}
    ~capture() {
        if (open_()) {
            cw_graph *g = nullptr;
            if (cw_capture_end(s_, into_ ? nullptr : &g) == CW_SUCCESS && g) cw_graph_destroy(&g);
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
        cw_status s = cw_capture_end(s_, into_ ? nullptr : &g);
        return detail::make(s, into_ ? graph::wrap(into_) : graph(g, true));
    }

  private:
    bool open_() const noexcept { return begun_ == CW_SUCCESS && !ended_; }
    cw_stream *s_;
    cw_graph *into_ = nullptr;
    cw_status begun_;
    bool ended_ = false;
};

// ---- the GPU-resident loop ------------------------------------------------------

namespace detail {
// The handle's destroy: tears a launched loop down first (up to the
// settings' destroy_timeout_ms). If it would not stop, the C call keeps the
// loop (the GPU may still use its memory) and this destructor lets it go:
// call tear_down() yourself when that matters.
inline void resident_destroy(cw_resident **r) { (void)cw_resident_destroy(r); }
}  // namespace detail

class resident : public detail::handle<cw_resident, detail::resident_destroy> {
  public:
    using handle::handle;
    static detail::ret<resident> create(const cw::context &c, const cw_resident_settings *settings = nullptr) {
        cw_resident *r = nullptr;
        cw_status s = cw_resident_create(&r, c.get(), settings);
        return detail::make(s, resident(r, true));
    }
    // The device block kernels receive (a cw_resident_ctl *), as a CUdeviceptr.
    unsigned long long ctl() const noexcept {
        unsigned long long p = 0;
        (void)cw_resident_get_ctl(get(), &p);
        return p;
    }
    // The loop's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_resident_get_context(get(), &c);
        return cw::context::wrap(c);
    }
    // The device address of input slot `slot` (0 <= slot < input_slots).
    detail::ret<unsigned long long> input(uint32_t slot) const {
        unsigned long long p = 0;
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
    detail::void_ret build() const { return detail::done(cw_resident_build(get())); }
    detail::void_ret launch() const { return detail::done(cw_resident_launch(get())); }
    detail::void_ret tear_down(uint32_t timeout_ms) const { return detail::done(cw_resident_tear_down(get(), timeout_ms)); }
    bool is_launched() const noexcept {
        int l = 0;
        (void)cw_resident_is_launched(get(), &l);
        return l != 0;
    }
    // Not launched, running, stopping or stopped (stats().exit says why).
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
    detail::ret<bool> result_ready(uint64_t seq) const {
        int r = 0;
        cw_status s = cw_resident_result_ready(get(), seq, &r);
        return detail::make(s, r != 0);
    }
    detail::void_ret wait_result(uint64_t seq, uint32_t timeout_ms) const {
        return detail::done(cw_resident_wait_result(get(), seq, timeout_ms));
    }
    // The input slot the next request reads, once free.
    detail::ret<unsigned long long> next_input(uint32_t timeout_ms) const {
        unsigned long long p = 0;
        cw_status s = cw_resident_next_input(get(), timeout_ms, &p);
        return detail::make(s, std::move(p));
    }
    detail::ret<cw_resident_stats> stats() const {
        cw_resident_stats st{};
        cw_status s = cw_resident_get_stats(get(), &st);
        return detail::make(s, std::move(st));
    }

  private:
    template <class F>
    struct capture_tramp {
        static cw_status call(cw_stream *s, void *user) noexcept {
            stream st = stream::wrap(s);
            return detail::call_for_c(*static_cast<F *>(user), st);
        }
    };
};

// The text of <cuweave/resident_device.h>, for NVRTC programs: an in-memory
// header named "cuweave/resident_device.h" (cw_header).
inline const char *resident_device_header() noexcept { return cw_resident_device_header(); }

// ---- programs, modules, kernels ------------------------------------------------

class program : public detail::handle<cw_program, cw_program_destroy> {
  public:
    using handle::handle;
    // Compiles (or finds in the cache) source for ctx's device; on a compile
    // error the status is CW_ERROR_COMPILE and cw_compile_log() has the log.
    static detail::ret<program> compile(const context &ctx, const char *source,
                                        const cw_program_settings *settings = nullptr) {
        cw_program *p = nullptr;
        cw_status s = cw_program_compile(&p, ctx.get(), source, settings);
        return detail::make(s, program(p, true));
    }
    cw_program_info info() const noexcept {
        cw_program_info i{};
        (void)cw_program_get_info(get(), &i);
        return i;
    }
    // The mangled name NVRTC gave one of the program's name expressions
    // (borrowed: lives with the program).
    detail::ret<const char *> lowered_name(const char *name_expression) const {
        const char *l = nullptr;
        cw_status s = cw_program_lowered_name(get(), name_expression, &l);
        return detail::make(s, std::move(l));
    }
};

// The NVRTC log of this thread's last compile that ran NVRTC.
inline const char *compile_log() noexcept { return cw_compile_log(); }

// NVRTC's version (loads it if needed; CW_ERROR_NO_NVRTC when it cannot).
struct nvrtc_version_info {
    int major = 0;
    int minor = 0;
};
inline detail::ret<nvrtc_version_info> nvrtc_version() {
    nvrtc_version_info v;
    cw_status s = cw_nvrtc_version(&v.major, &v.minor);
    return detail::make(s, std::move(v));
}

// The kernel cache (jit.h): settings for later compiles, counters, and
// emptying the memory cache (the disk cache is left alone).
inline detail::void_ret jit_cache_configure(const cw_jit_cache_settings &s) {
    return detail::done(cw_jit_cache_configure(&s));
}
inline detail::ret<cw_jit_stats> jit_stats() {
    cw_jit_stats st{};
    cw_status s = cw_jit_get_stats(&st);
    return detail::make(s, std::move(st));
}
inline void jit_cache_clear_memory() noexcept { cw_jit_cache_clear_memory(); }

// Grid and block dimensions.
struct dims {
    unsigned x = 1, y = 1, z = 1;
    dims(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
};

// A kernel of a module (borrowed: valid while its module lives). A value:
// copy it freely.
class kernel {
  public:
    kernel() noexcept = default;
    explicit kernel(cw_kernel *k) noexcept : k_(k) {}
    cw_kernel *get() const noexcept { return k_; }

    // Launches with typed arguments: their number, and each one's size, are
    // checked against the kernel's parameters where the driver can list them
    // (CUDA 12.4+); a mismatch is CW_ERROR_INVALID_ARGUMENT, nothing launched.
    template <class... Args>
    detail::void_ret launch(const stream &s, dims grid, dims block, const Args &...args) const {
        cw_launch_config c;
        cw_launch_config_default(&c);
        c.grid[0] = grid.x, c.grid[1] = grid.y, c.grid[2] = grid.z;
        c.block[0] = block.x, c.block[1] = block.y, c.block[2] = block.z;
        return launch_with(s, c, args...);
    }
    template <class... Args>
    detail::void_ret launch_with(const stream &s, const cw_launch_config &c, const Args &...args) const {
        static_assert(detail::all_trivially_copyable<Args...>::value, "kernel arguments must be trivially copyable");
        const size_t sizes[] = {sizeof(Args)..., 0};
        cw_context *c_ctx = nullptr;
        (void)cw_stream_get_context(s.get(), &c_ctx);
        cw_status st = check(c_ctx, sizes, sizeof...(Args));
        if (st != CW_SUCCESS) return fail_args(st);
        void *ptrs[] = {const_cast<void *>(static_cast<const void *>(&args))..., nullptr};
        return detail::done(cw_kernel_launch(k_, s.get(), &c, ptrs));
    }
    // The parameter count the driver reports (-1 when it cannot say); the
    // kernel is loaded into ctx to ask.
    int param_count(const context &ctx) const noexcept {
        load(ctx.get());
        return n_;
    }
    // Loads the kernel into ctx now (before any resident loop is launched:
    // loading waits until no kernel runs on the device).
    detail::void_ret preload(const context &ctx) const { return detail::done(cw_kernel_preload(k_, ctx.get())); }
    // The driver kernel (a CUkernel, borrowed).
    void *native() const noexcept {
        void *k = nullptr;
        (void)cw_kernel_get_handle(k_, &k);
        return k;
    }

  private:
    void load(cw_context *ctx) const noexcept {
        if (n_ != -2 || !ctx) return;
        size_t n = 0;
        n_ = cw_kernel_get_params(k_, ctx, &n, sizes_, kMax) == CW_SUCCESS && n <= kMax ? (int)n : -1;
    }
    cw_status check(cw_context *ctx, const size_t *sizes, size_t n) const noexcept {
        load(ctx);
        if (n_ < 0) return CW_SUCCESS;  // the driver cannot say: launch unchecked
        if ((size_t)n_ != n) return CW_ERROR_INVALID_ARGUMENT;
        for (size_t i = 0; i < n; i++)
            if (sizes[i] != sizes_[i]) return CW_ERROR_INVALID_ARGUMENT;
        return CW_SUCCESS;
    }
    detail::void_ret fail_args(cw_status st) const {
#ifndef CW_HPP_NO_EXCEPTIONS
        std::string m = "cw::kernel::launch: the arguments do not match the kernel's " + std::to_string(n_) +
                        " parameter(s) (count or size)";
        throw error(st, m);
#else
        return detail::done(st);
#endif
    }
    static constexpr size_t kMax = 64;
    cw_kernel *k_ = nullptr;
    mutable int n_ = -2;  // -2: not asked yet
    mutable size_t sizes_[kMax] = {};
};

class module : public detail::handle<cw_module, cw_module_destroy> {
  public:
    using handle::handle;
    static detail::ret<module> load(const program &p) {
        cw_module *m = nullptr;
        cw_status s = cw_module_load(&m, p.get());
        return detail::make(s, module(m, true));
    }
    // A cubin, fatbin or PTX image in memory.
    static detail::ret<module> load_image(const void *image) {
        cw_module *m = nullptr;
        cw_status s = cw_module_load_image(&m, image);
        return detail::make(s, module(m, true));
    }
    // By extern "C" name, mangled name, or the program's name expression.
    detail::ret<kernel> get_kernel(const char *name) const {
        cw_kernel *k = nullptr;
        cw_status s = cw_module_get_kernel(get(), name, &k);
        return detail::make(s, kernel(k));
    }
};

// The library's own kernels (never destroyed).
inline detail::ret<kernel> builtin_kernel(cw_builtin which) {
    cw_kernel *k = nullptr;
    cw_status s = cw_builtin_kernel(which, &k);
    return detail::make(s, kernel(k));
}
// How they were made ("cubin+ptx (nvcc at build time)" or "ptx (checked in)").
inline const char *builtin_origin() noexcept { return cw_builtin_origin(); }

// ---- buffers -------------------------------------------------------------------

// A reference to a cw_buffer: the owning wrapper drops its reference in its
// destructor (the memory goes after every recorded use, buffer.h).
class buffer : public detail::handle<cw_buffer, cw_buffer_release> {
  public:
    using handle::handle;
    static detail::ret<buffer> alloc(const stream &s, size_t bytes) {
        cw_buffer *b = nullptr;
        cw_status st = cw_buffer_alloc(&b, s.get(), bytes);
        return detail::make(st, buffer(b, true));
    }
    // Borrows a buffer (one a message carries, say): no reference taken.
    static buffer wrap(cw_buffer *b) noexcept { return buffer(b, false); }
    // A new reference of its own (kept past the compute call that lent it).
    detail::ret<buffer> share() const {
        cw_status st = cw_buffer_retain(get());
        return detail::make(st, buffer(st == CW_SUCCESS ? get() : nullptr, true));
    }
    unsigned long long ptr() const noexcept {
        unsigned long long p = 0;
        (void)cw_buffer_get_ptr(get(), &p);
        return p;
    }
    // The address for writing: only while this is the one reference.
    detail::ret<unsigned long long> writable() const {
        unsigned long long p = 0;
        cw_status st = cw_buffer_get_writable(get(), &p);
        return detail::make(st, std::move(p));
    }
    size_t size() const noexcept {
        cw_buffer_info i{};
        (void)cw_buffer_get_info(get(), &i);
        return i.bytes;
    }
    cw_buffer_info info() const noexcept {
        cw_buffer_info i{};
        (void)cw_buffer_get_info(get(), &i);
        return i;
    }
    // The free waits for what s has enqueued so far.
    detail::void_ret used_by(const stream &s) const { return detail::done(cw_buffer_use(get(), s.get())); }
    // Copies the whole of src into this buffer (at least as large, and
    // writable: the one reference) on s, whatever devices the two are on
    // (cw_buffer_copy); both are recorded as used by s.
    detail::void_ret copy_from(const stream &s, const buffer &src) const {
        return detail::done(cw_buffer_copy(s.get(), get(), src.get()));
    }
    // The buffer's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_buffer_get_context(get(), &c);
        return cw::context::wrap(c);
    }
};

// Copies in stream order on s (cw_copy_to_device / cw_copy_to_host): from
// host memory to a device address, and back. The data is there once s has
// reached the copy (a future, or s.synchronize()). From page-locked memory
// (cw::host_buffer) the copy is asynchronous: leave the host memory alone
// until then.
inline detail::void_ret copy_to_device(const stream &s, unsigned long long dst, const void *src, size_t bytes) {
    return detail::done(cw_copy_to_device(s.get(), dst, src, bytes));
}
inline detail::void_ret copy_to_host(const stream &s, void *dst, unsigned long long src, size_t bytes) {
    return detail::done(cw_copy_to_host(s.get(), dst, src, bytes));
}

// Page-locked, device-mapped host memory (cw_host_alloc), zeroed; freed with
// cw_host_free in the destructor. The device address is the pointer
// (unified addressing): kernels may use it directly. The memory does not
// keep its context alive: destroy a host_buffer before the context wrapper
// it was made with (declare it after).
class host_buffer {
  public:
    host_buffer() noexcept = default;
    static detail::ret<host_buffer> alloc(const context &ctx, size_t bytes) {
        void *p = nullptr;
        cw_status s = cw_host_alloc(ctx.get(), bytes, &p);
        return detail::make(s, s == CW_SUCCESS ? host_buffer(ctx.get(), p, bytes) : host_buffer());
    }
    ~host_buffer() { reset(); }
    host_buffer(const host_buffer &) = delete;
    host_buffer &operator=(const host_buffer &) = delete;
    host_buffer(host_buffer &&o) noexcept : ctx_(o.ctx_), p_(o.p_), n_(o.n_) { o.forget(); }
    host_buffer &operator=(host_buffer &&o) noexcept {
        if (this != &o) {
            reset();
            ctx_ = o.ctx_;
            p_ = o.p_;
            n_ = o.n_;
            o.forget();
        }
        return *this;
    }
    void *data() const noexcept { return p_; }
    template <class T>
    T *as() const noexcept {
        return static_cast<T *>(p_);
    }
    size_t size() const noexcept { return n_; }
    // The device address of the memory (the same address).
    unsigned long long device_ptr() const noexcept {
        return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p_));
    }
    // The context it was allocated with, borrowed.
    cw_context *context_handle() const noexcept { return ctx_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    // Frees now (the free waits for running resident loops, host_free in buffer.h).
    void reset() noexcept {
        if (p_) cw_host_free(ctx_, p_);
        forget();
    }
    // Gives the memory up; the caller frees it with cw_host_free (with the
    // context of context_handle(): take that first).
    void *release() noexcept {
        void *p = p_;
        forget();
        return p;
    }

  private:
    host_buffer(cw_context *c, void *p, size_t n) noexcept : ctx_(c), p_(p), n_(n) {}
    void forget() noexcept {
        ctx_ = nullptr;
        p_ = nullptr;
        n_ = 0;
    }
    cw_context *ctx_ = nullptr;
    void *p_ = nullptr;
    size_t n_ = 0;
};

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

// ---- collectives (NCCL) -------------------------------------------------------------

// NCCL's version (22703 for 2.27.3); CW_ERROR_NOT_SUPPORTED without NCCL.
inline detail::ret<int> nccl_version() {
    int v = 0;
    cw_status s = cw_nccl_version(&v);
    return detail::make(s, std::move(v));
}

// A communicator: one NCCL rank per context, rank i on ctxs[i] (primary
// contexts, one per device); destroyed (cw_comm_destroy) after the work
// already enqueued when the wrapper goes.
class comm : public detail::handle<cw_comm, cw_comm_destroy> {
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
    // ... or on a device set's members (rank i: member i).
    static detail::ret<comm> create(const device_set &set) {
        cw_context *v[CW_MAX_DEVICES] = {};
        const int n = set.size();
        for (int i = 0; i < n && i < CW_MAX_DEVICES; i++) v[i] = set.context(i).get();
        return create(v, n);
    }
    // Borrows a cw_comm: never destroyed.
    static comm wrap(cw_comm *c) noexcept { return comm(c, false); }

    // The number of ranks (0 for an empty wrapper).
    int size() const noexcept {
        int n = 0;
        (void)cw_comm_size(get(), &n);
        return n;
    }
    // Rank `rank`'s context, borrowed (empty for a rank out of range).
    cw::context context(int rank) const noexcept {
        cw_context *c = nullptr;
        (void)cw_comm_get_context(get(), rank, &c);
        return cw::context::wrap(c);
    }
    // Every rank at once (arrays of size() entries, one NCCL group): recv[i]
    // gets op over every send[i] (send[i] == recv[i]: in place), on streams[i].
    detail::void_ret all_reduce(const unsigned long long *send, const unsigned long long *recv, size_t count,
                                cw_dtype dtype, cw_reduce_op op, cw_stream *const *streams) const {
        return detail::done(cw_comm_all_reduce(get(), send, recv, count, dtype, op, streams));
    }
    // Every recv[i] gets send[root] (the other sends may be 0).
    detail::void_ret broadcast(const unsigned long long *send, const unsigned long long *recv, size_t count,
                               cw_dtype dtype, int root, cw_stream *const *streams) const {
        return detail::done(cw_comm_broadcast(get(), send, recv, count, dtype, root, streams));
    }
    // One rank's part: from that rank's own thread, or for several ranks
    // inside a cw::comm_group (else NCCL deadlocks).
    detail::void_ret all_reduce_rank(int rank, unsigned long long send, unsigned long long recv, size_t count,
                                     cw_dtype dtype, cw_reduce_op op, const stream &s) const {
        return detail::done(cw_comm_all_reduce_rank(get(), rank, send, recv, count, dtype, op, s.get()));
    }
    detail::void_ret broadcast_rank(int rank, unsigned long long send, unsigned long long recv, size_t count,
                                    cw_dtype dtype, int root, const stream &s) const {
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
            out.data = buffer::wrap(m.buffer);
            out.producer = stream::wrap(m.stream);
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
                    out[i].data = buffer::wrap(m[i].buffer);
                    out[i].producer = stream::wrap(m[i].stream);
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
    // The stream of every message on the port (empty for messages without
    // one), borrowed, with no ordering and no side effect ...
    detail::ret<std::vector<stream>> receive_streams(const char *port) const {
        std::vector<stream> out;
        size_t n = 0;
        cw_status st = cw_io_receive_streams(h_, port, nullptr, 0, &n);
        if (st == CW_SUCCESS && n > 0) {
            std::vector<cw_stream *> v(n);
            st = cw_io_receive_streams(h_, port, v.data(), n, &n);
            if (st == CW_SUCCESS) {
                out.reserve(n < v.size() ? n : v.size());
                for (size_t i = 0; i < n && i < v.size(); i++) out.push_back(stream::wrap(v[i]));
            }
        }
        return detail::make(st, std::move(out));
    }
    // ... or up to cap of them; returns how many there are.
    detail::ret<size_t> receive_streams(const char *port, cw_stream **streams, size_t cap) const {
        size_t n = 0;
        cw_status st = cw_io_receive_streams(h_, port, streams, cap, &n);
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
        return detail::make(st, stream::wrap(s));
    }
    // A named extra stream of the operator (the same name, the same stream).
    detail::ret<stream> named_stream(const char *name) const {
        cw_stream *s = nullptr;
        cw_status st = cw_io_stream(h_, name, &s);
        return detail::make(st, stream::wrap(s));
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
        cw_status st = cw_io_alloc(h_, bytes, &b);
        return detail::make(st, buffer::wrap(b));
    }
    detail::ret<unsigned long long> port_ptr(const char *port) const {
        unsigned long long p = 0;
        cw_status st = cw_io_port_ptr(h_, port, &p);
        return detail::make(st, std::move(p));
    }
    detail::ret<unsigned long long> resident_ctl() const {
        unsigned long long c = 0;
        cw_status st = cw_io_resident_ctl(h_, &c);
        return detail::make(st, std::move(c));
    }
    uint64_t iteration() const noexcept {
        uint64_t i = 0;
        (void)cw_io_get_iteration(h_, &i);
        return i;
    }
    // The operator being computed (borrowed), and its name.
    cw_operator *op() const noexcept {
        cw_operator *o = nullptr;
        (void)cw_io_get_operator(h_, &o);
        return o;
    }
    const char *op_name() const noexcept { return cw_operator_name(op()); }

  private:
    cw_io *h_;
};

// An operator's name (owned by it; nullptr for nullptr).
inline const char *operator_name(const cw_operator *op) noexcept { return op ? cw_operator_name(op) : nullptr; }

// Where an operator declares its ports (in setup()).
class op_spec {
  public:
    explicit op_spec(cw_operator *op) noexcept : op_(op) {}
    // An input: flags CW_PORT_OPTIONAL / CW_PORT_MANY; bytes or dptr for port memory.
    op_spec &input(const char *name, unsigned flags = 0, size_t bytes = 0, unsigned long long dptr = 0) {
        cw_port_settings s;
        cw_port_settings_default(&s);
        s.flags = flags, s.bytes = bytes, s.dptr = dptr;
        note(cw_operator_add_input(op_, name, &s));
        return *this;
    }
    op_spec &output(const char *name, size_t bytes = 0, unsigned long long dptr = 0) {
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

class pipeline : public detail::handle<cw_pipeline, cw_pipeline_destroy> {
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
                                            {nullptr, nullptr, nullptr, nullptr}};
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
            std::string m = cw_last_error_message();
            cw_operator_destroy(&o);
#ifndef CW_HPP_NO_EXCEPTIONS
            throw error(keep, m);
#else
            return detail::make(keep, static_cast<cw_operator *>(nullptr));
#endif
        }
        return detail::make(CW_SUCCESS, std::move(o));
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
        cw_status s = cw_pipeline_find(get(), name, &o);
        return detail::make(s, std::move(o));
    }
    // The device address of a port's memory, from outside compute (after
    // make_resident, or a run of a pipeline whose ports declare memory).
    detail::ret<unsigned long long> port_ptr(const char *op, const char *port) const {
        unsigned long long p = 0;
        cw_status s = cw_pipeline_port_ptr(get(), op, port, &p);
        return detail::make(s, std::move(p));
    }
    // The pipeline's context, borrowed.
    cw::context context() const noexcept {
        cw_context *c = nullptr;
        (void)cw_pipeline_get_context(get(), &c);
        return cw::context::wrap(c);
    }
    detail::void_ret make_resident(const resident &r) {
        return detail::done(cw_pipeline_make_resident(get(), r.get()));
    }
    cw_pipeline_stats stats() const noexcept {
        cw_pipeline_stats st{};
        (void)cw_pipeline_get_stats(get(), &st);
        return st;
    }
};

// The wrappers cost nothing beyond the handle and its ownership flag, and
// moving them never throws.
namespace detail {
struct handle_and_flag {
    void *h;
    bool owned;
};
}  // namespace detail
static_assert(sizeof(context) == sizeof(detail::handle_and_flag), "context is the handle plus ownership");
static_assert(sizeof(stream) == sizeof(detail::handle_and_flag), "stream is the handle plus ownership");
static_assert(sizeof(stream_pool) == sizeof(detail::handle_and_flag), "stream_pool is the handle plus ownership");
static_assert(sizeof(partition_set) == sizeof(detail::handle_and_flag), "partition_set is the handle plus ownership");
static_assert(sizeof(timer) == sizeof(detail::handle_and_flag), "timer is the handle plus ownership");
static_assert(sizeof(future) == sizeof(detail::handle_and_flag), "future is the handle plus ownership");
static_assert(sizeof(graph) == sizeof(detail::handle_and_flag), "graph is the handle plus ownership");
static_assert(sizeof(graph_exec) == sizeof(detail::handle_and_flag), "graph_exec is the handle plus ownership");
static_assert(sizeof(program) == sizeof(detail::handle_and_flag), "program is the handle plus ownership");
static_assert(sizeof(module) == sizeof(detail::handle_and_flag), "module is the handle plus ownership");
static_assert(sizeof(resident) == sizeof(detail::handle_and_flag), "resident is the handle plus ownership");
static_assert(sizeof(buffer) == sizeof(detail::handle_and_flag), "buffer is the handle plus ownership");
static_assert(sizeof(pipeline) == sizeof(detail::handle_and_flag), "pipeline is the handle plus ownership");
static_assert(sizeof(device_set) == sizeof(detail::handle_and_flag), "device_set is the handle plus ownership");
static_assert(sizeof(comm) == sizeof(detail::handle_and_flag), "comm is the handle plus ownership");
static_assert(sizeof(comm_group) == sizeof(bool), "comm_group is whether it is open");
static_assert(sizeof(io) == sizeof(void *), "io is the handle");
static_assert(std::is_nothrow_move_constructible<buffer>::value && std::is_nothrow_move_assignable<pipeline>::value,
              "buffers and pipelines move without throwing");
static_assert(std::is_nothrow_move_constructible<resident>::value && std::is_nothrow_move_assignable<resident>::value,
              "resident moves without throwing");
static_assert(std::is_nothrow_move_constructible<module>::value && std::is_nothrow_move_assignable<program>::value,
              "modules and programs move without throwing");
static_assert(std::is_nothrow_move_constructible<graph>::value && std::is_nothrow_move_assignable<graph_exec>::value,
              "graphs move without throwing");
static_assert(sizeof(lease) == 2 * sizeof(void *), "lease is the pool and the stream");
static_assert(std::is_nothrow_move_constructible<stream>::value && std::is_nothrow_move_assignable<stream>::value,
              "stream moves never throw");
static_assert(std::is_nothrow_move_constructible<lease>::value && std::is_nothrow_move_assignable<lease>::value,
              "lease moves never throw");
static_assert(!std::is_copy_constructible<stream>::value && !std::is_copy_assignable<future>::value,
              "wrappers are not copyable");
static_assert(sizeof(host_buffer) == 2 * sizeof(void *) + sizeof(size_t),
              "host_buffer is the context, the pointer and the size");
static_assert(!std::is_copy_constructible<host_buffer>::value && !std::is_copy_assignable<host_buffer>::value,
              "host memory is not copyable");
static_assert(std::is_nothrow_move_constructible<host_buffer>::value &&
                  std::is_nothrow_move_assignable<host_buffer>::value,
              "host_buffer moves never throw");
static_assert(sizeof(forked) == 2 * sizeof(void *), "forked is the parent and the child");
static_assert(!std::is_copy_constructible<forked>::value && !std::is_copy_assignable<forked>::value,
              "forked is not copyable");
static_assert(std::is_nothrow_move_constructible<forked>::value && std::is_nothrow_move_assignable<forked>::value,
              "forked moves never throw");
static_assert(std::is_nothrow_move_constructible<context>::value && std::is_nothrow_move_assignable<context>::value &&
                  std::is_nothrow_move_constructible<partition_set>::value &&
                  std::is_nothrow_move_assignable<partition_set>::value &&
                  std::is_nothrow_move_constructible<stream_pool>::value &&
                  std::is_nothrow_move_assignable<stream_pool>::value &&
                  std::is_nothrow_move_constructible<timer>::value && std::is_nothrow_move_assignable<timer>::value &&
                  std::is_nothrow_move_constructible<future>::value && std::is_nothrow_move_assignable<future>::value,
              "contexts, partition sets, pools, timers and futures move without throwing");
static_assert(std::is_nothrow_move_constructible<device_set>::value && std::is_nothrow_move_assignable<device_set>::value &&
                  std::is_nothrow_move_constructible<comm>::value && std::is_nothrow_move_assignable<comm>::value,
              "device sets and communicators move without throwing");
static_assert(!std::is_copy_constructible<comm_group>::value && !std::is_copy_assignable<comm_group>::value &&
                  std::is_nothrow_move_constructible<comm_group>::value &&
                  std::is_nothrow_move_assignable<comm_group>::value,
              "comm_group is move-only and its moves never throw");

}  // namespace cw

#endif  // CUWEAVE_CUWEAVE_HPP
