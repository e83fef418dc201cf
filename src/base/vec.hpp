/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave base: a growable array for a library built without exceptions.
// push() reports running out of memory instead of aborting (std::vector
// would terminate the process). Elements are relocated bitwise, so T must not
// point into itself (every use here holds plain values and such arrays).
#pragma once

#include <new>
#include <stdlib.h>
#include <string.h>

namespace cw {

template <class T>
class Vec {
  public:
    Vec() = default;
    ~Vec() { reset(); }
    Vec(const Vec &) = delete;
    Vec &operator=(const Vec &) = delete;

    // False when out of memory (nothing changed).
    bool reserve(size_t cap) {
        if (cap <= cap_) return true;
        void *m = realloc(static_cast<void *>(data_), cap * sizeof(T));
        if (!m) return false;
        data_ = static_cast<T *>(m);
        cap_ = cap;
        return true;
    }
    bool push(const T &v) {
        if (n_ == cap_ && !reserve(cap_ ? cap_ * 2 : 4)) return false;
        new (&data_[n_]) T(v);
        n_++;
        return true;
    }
    // A new default-constructed element at the end, or NULL when out of memory.
    T *emplace() {
        if (n_ == cap_ && !reserve(cap_ ? cap_ * 2 : 4)) return nullptr;
        T *e = new (&data_[n_]) T();
        n_++;
        return e;
    }
    // n copies of v (after clearing). False when out of memory.
    bool assign(size_t n, const T &v) {
        clear();
        if (!reserve(n)) return false;
        for (size_t i = 0; i < n; i++) new (&data_[i]) T(v);
        n_ = n;
        return true;
    }
    void pop() { data_[--n_].~T(); }
    // Removes the first k elements (at most size()), moving the rest up.
    void erase_front(size_t k) {
        if (k > n_) k = n_;
        if (k == 0) return;
        for (size_t i = 0; i < k; i++) data_[i].~T();
        memmove(static_cast<void *>(data_), static_cast<const void *>(data_ + k), (n_ - k) * sizeof(T));
        n_ -= k;
    }
    void clear() {
        for (size_t i = 0; i < n_; i++) data_[i].~T();
        n_ = 0;
    }
    void reset() {
        clear();
        free(static_cast<void *>(data_));
        data_ = nullptr;
        cap_ = 0;
    }
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    T &operator[](size_t i) { return data_[i]; }
    const T &operator[](size_t i) const { return data_[i]; }
    T &back() { return data_[n_ - 1]; }
    T *begin() { return data_; }
    T *end() { return data_ + n_; }
    const T *begin() const { return data_; }
    const T *end() const { return data_ + n_; }

  private:
    T *data_ = nullptr;
    size_t n_ = 0, cap_ = 0;
};

}  // namespace cw
