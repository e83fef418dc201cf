/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: the common bootstrap of a communicator by rank
// (collective.hpp, comm_bootstrap). Rank 0 makes the id and publishes it
// with the world size, through a file (written to a temporary beside it,
// then renamed) or a TCP socket (rank 0 listens; the others connect with
// retries); every rank then joins with comm_create_rank. The timeout bounds
// the whole call.
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "multi/collective.hpp"

namespace cw {
namespace multi {

namespace {

constexpr char kMagic[] = "cuweave-comm-id 1";

uint64_t mono_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

struct Deadline {
    uint64_t start;
    uint32_t total;
    // Milliseconds left (0 when past).
    uint32_t left() const {
        uint64_t spent = mono_ms() - start;
        return spent >= total ? 0 : (uint32_t)(total - spent);
    }
};

cw_status fail_errno(int err, const char *call, const char *what) {
    return fail(CW_ERROR_DRIVER, "%s failed for %s: %s", call, what, strerror(err));
}

// A decimal int from the environment (name), or the setting when given.
cw_status env_int(const char *name, int *value, int lo, int hi) {
    const char *e = getenv(name);
    if (!e || !*e) return fail(CW_ERROR_INVALID_ARGUMENT, "%s is not set (and the settings do not give it)", name);
    char *end = nullptr;
    errno = 0;
    long v = strtol(e, &end, 10);
    if (errno || !end || *end != '\0' || v < lo || v > hi)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s=\"%s\" is not a whole number in [%d, %d]", name, e, lo, hi);
    *value = (int)v;
    return CW_SUCCESS;
}

// The message both ways: the magic line, the world size, the id in hex.
// 17 + 1 + 11 + 1 + 256 + 1 bytes at most.
constexpr size_t kMsgMax = 320;

size_t format_msg(char *buf, int world, const cw_comm_id *id) {
    int n = snprintf(buf, kMsgMax, "%s\n%d\n", kMagic, world);
    for (int i = 0; i < CW_COMM_ID_BYTES; i++) n += snprintf(buf + n, kMsgMax - (size_t)n, "%02x", id->bytes[i]);
    n += snprintf(buf + n, kMsgMax - (size_t)n, "\n");
    return (size_t)n;
}

int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

// Parses what format_msg wrote; `from` names the source in the detail.
cw_status parse_msg(const char *buf, size_t len, int *world, cw_comm_id *id, const char *from) {
    size_t mlen = sizeof kMagic - 1;
    if (len < mlen + 1 || memcmp(buf, kMagic, mlen) != 0 || buf[mlen] != '\n')
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s does not hold a cuweave communicator id (no \"%s\" line)", from,
                    kMagic);
    const char *p = buf + mlen + 1;
    const char *end = buf + len;
    char *q = nullptr;
    long w = strtol(p, &q, 10);
    if (q == p || q >= end || *q != '\n' || w < 1 || w > 1000000)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the world size line is malformed", from);
    p = q + 1;
    if (end - p < 2 * CW_COMM_ID_BYTES)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the id is cut short", from);
    for (int i = 0; i < CW_COMM_ID_BYTES; i++) {
        int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
        if (hi < 0 || lo < 0) return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the id is not hexadecimal", from);
        id->bytes[i] = (uint8_t)(hi * 16 + lo);
    }
    *world = (int)w;
    return CW_SUCCESS;
}

cw_status check_world(int theirs, int ours, const char *from) {
    if (theirs != ours)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s has world size %d, this rank %d: the ranks disagree", from, theirs,
                    ours);
    return CW_SUCCESS;
}

// ---- file ------------------------------------------------------------------

cw_status file_publish(const char *path, int world, const cw_comm_id *id) {
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) return fail(CW_ERROR_INVALID_ARGUMENT, "the file path is too long");
    char msg[kMsgMax];
    size_t len = format_msg(msg, world, id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return fail_errno(errno, "open", tmp);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, msg + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = errno;
            close(fd);
            unlink(tmp);
            return fail_errno(err, "write", tmp);
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        int err = errno;
        unlink(tmp);
        return fail_errno(err, "close", tmp);
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return fail_errno(err, "rename", path);
    }
    return CW_SUCCESS;
}

cw_status file_fetch(const char *path, int world, cw_comm_id *id, const Deadline &dl) {
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char msg[kMsgMax + 1];
            size_t len = 0;
            for (;;) {
                ssize_t r = read(fd, msg + len, kMsgMax - len);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) break;
                len += (size_t)r;
                if (len == kMsgMax) break;
            }
            close(fd);
            int theirs = 0;
            char from[4200];
            snprintf(from, sizeof from, "the file %s", path);
            CW_TRY(parse_msg(msg, len, &theirs, id, from));
            return check_world(theirs, world, from);
        }
        if (errno != ENOENT) return fail_errno(errno, "open", path);
        uint32_t left = dl.left();
        if (left == 0)
            return fail(CW_ERROR_TIMEOUT, "rank 0 did not write %s within %u ms", path, dl.total);
        sleep_ms(left < 10 ? left : 10);
    }
}

// ---- TCP -------------------------------------------------------------------

// "host:port" or "[v6]:port" into host and port.
cw_status split_addr(const char *addr, char *host, size_t hcap, char *port, size_t pcap) {
    const char *colon;
    const char *hb = addr, *he;
    if (addr[0] == '[') {
        he = strchr(addr, ']');
        if (!he || he[1] != ':')
            return fail(CW_ERROR_INVALID_ARGUMENT, "CUWEAVE_COMM_ADDR \"%s\" is not [host]:port", addr);
        hb = addr + 1;
        colon = he + 1;
    } else {
        colon = strrchr(addr, ':');
        he = colon;
    }
    if (!colon || he == hb || !colon[1])
        return fail(CW_ERROR_INVALID_ARGUMENT, "the address \"%s\" is not host:port", addr);
    char *end = nullptr;
    long p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p < 1 || p > 65535)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the address \"%s\": the port is not a number in [1, 65535]", addr);
    size_t hl = (size_t)(he - hb);
    if (hl + 1 > hcap) return fail(CW_ERROR_INVALID_ARGUMENT, "the address \"%s\": the host is too long", addr);
    memcpy(host, hb, hl);
    host[hl] = '\0';
    snprintf(port, pcap, "%ld", p);
    return CW_SUCCESS;
}

// Waits until fd is ready for events (POLLIN or POLLOUT), up to the deadline.
cw_status wait_fd(int fd, short events, const Deadline &dl, const char *what) {
    for (;;) {
        struct pollfd p = {fd, events, 0};
        uint32_t left = dl.left();
        int r = poll(&p, 1, (int)(left > 0x7fffffff ? 0x7fffffff : left));
        if (r > 0) return CW_SUCCESS;
        if (r == 0) return fail(CW_ERROR_TIMEOUT, "%s: nothing within %u ms", what, dl.total);
        if (errno != EINTR) return fail_errno(errno, "poll", what);
    }
}

cw_status send_all(int fd, const char *buf, size_t len, const Deadline &dl, const char *what) {
    size_t done = 0;
    while (done < len) {
        CW_TRY(wait_fd(fd, POLLOUT, dl, what));
        ssize_t w = send(fd, buf + done, len - done, MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) return fail_errno(errno, "send", what);
        done += (size_t)w;
    }
    return CW_SUCCESS;
}

// Reads until the message's third newline (or the peer closes).
cw_status recv_msg(int fd, char *buf, size_t cap, size_t *len, const Deadline &dl, const char *what) {
    size_t n = 0;
    int lines = 0;
    while (lines < 3 && n < cap) {
        CW_TRY(wait_fd(fd, POLLIN, dl, what));
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) return fail_errno(errno, "recv", what);
        if (r == 0) break;
        for (ssize_t i = 0; i < r; i++)
            if (buf[n + (size_t)i] == '\n') lines++;
        n += (size_t)r;
    }
    *len = n;
    return CW_SUCCESS;
}

class Fd {
  public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return fd_; }
    void reset(int fd) {
        if (fd_ >= 0) close(fd_);
        fd_ = fd;
    }

  private:
    int fd_;
};

class AddrInfo {
  public:
    ~AddrInfo() {
        if (ai) freeaddrinfo(ai);
    }
    struct addrinfo *ai = nullptr;
};

cw_status resolve(const char *addr, bool passive, AddrInfo *out) {
    char host[256], port[16];
    CW_TRY(split_addr(addr, host, sizeof host, port, sizeof port));
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    int r = getaddrinfo(host, port, &hints, &out->ai);
    if (r != 0 || !out->ai)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the address \"%s\" does not resolve: %s", addr, gai_strerror(r));
    return CW_SUCCESS;
}

// Rank 0: listens on addr and answers the world - 1 other ranks once each.
cw_status tcp_serve(const char *addr, int world, const cw_comm_id *id, const Deadline &dl) {
    AddrInfo ai;
    CW_TRY(resolve(addr, true, &ai));
    Fd ls(socket(ai.ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (ls.get() < 0) return fail_errno(errno, "socket", addr);
    int one = 1;
    (void)setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls.get(), ai.ai->ai_addr, ai.ai->ai_addrlen) != 0) return fail_errno(errno, "bind", addr);
    if (listen(ls.get(), world < 128 ? world : 128) != 0) return fail_errno(errno, "listen", addr);
    char msg[kMsgMax];
    size_t len = format_msg(msg, world, id);
    // Which ranks came (1..world-1).
    unsigned char *seen = static_cast<unsigned char *>(calloc((size_t)world, 1));
    if (!seen) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    cw_status st = CW_SUCCESS;
    for (int served = 0; served < world - 1 && st == CW_SUCCESS;) {
        st = wait_fd(ls.get(), POLLIN, dl, "rank 0 waiting for the other ranks");
        if (st != CW_SUCCESS) {
            st = fail(CW_ERROR_TIMEOUT, "rank 0 on %s: %d of the %d other ranks came within %u ms", addr, served,
                      world - 1, dl.total);
            break;
        }
        Fd peer(accept4(ls.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (peer.get() < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
            st = fail_errno(errno, "accept", addr);
            break;
        }
        // The peer says its rank and world size: "rank world\n".
        char hello[64];
        size_t n = 0;
        while (n < sizeof hello - 1) {
            st = wait_fd(peer.get(), POLLIN, dl, "rank 0 reading a peer's hello");
            if (st != CW_SUCCESS) break;
            ssize_t r = recv(peer.get(), hello + n, sizeof hello - 1 - n, 0);
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (r <= 0) break;
            n += (size_t)r;
            if (memchr(hello, '\n', n)) break;
        }
        if (st != CW_SUCCESS) break;
        hello[n] = '\0';
        int prank = -1, pworld = -1;
        if (sscanf(hello, "%d %d", &prank, &pworld) != 2) continue;  // not a cuweave rank: ignored
        if (pworld != world) {
            st = fail(CW_ERROR_INVALID_ARGUMENT, "rank %d has world size %d, rank 0 %d: the ranks disagree", prank,
                      pworld, world);
            break;
        }
        if (prank < 1 || prank >= world) {
            st = fail(CW_ERROR_INVALID_ARGUMENT, "a peer says it is rank %d of %d", prank, world);
            break;
        }
        if (seen[prank]) {
            st = fail(CW_ERROR_INVALID_ARGUMENT, "rank %d came twice: two processes have the same rank", prank);
            break;
        }
        st = send_all(peer.get(), msg, len, dl, "rank 0 sending the id");
        if (st == CW_SUCCESS) {
            seen[prank] = 1;
            served++;
        }
    }
    free(seen);
    return st;
}

// Another rank: connects to rank 0 (retrying until it listens) and reads
// the id.
cw_status tcp_fetch(const char *addr, int rank, int world, cw_comm_id *id, const Deadline &dl) {
    AddrInfo ai;
    CW_TRY(resolve(addr, false, &ai));
    char what[320];
    snprintf(what, sizeof what, "rank %d reading the id from rank 0 at %s", rank, addr);
    for (;;) {
        // Non-blocking: an unreachable host does not hold the call past the
        // deadline (a blocking connect waits for the kernel's own timeout).
        Fd fd(socket(ai.ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (fd.get() < 0) return fail_errno(errno, "socket", addr);
        int cr = connect(fd.get(), ai.ai->ai_addr, ai.ai->ai_addrlen);
        if (cr != 0 && errno == EINPROGRESS) {
            struct pollfd p = {fd.get(), POLLOUT, 0};
            uint32_t left = dl.left();
            int pr = poll(&p, 1, (int)(left > 0x7fffffff ? 0x7fffffff : left));
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (pr > 0 && getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
                cr = 0;
            } else {
                errno = pr == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            }
        }
        if (cr == 0) {
            char hello[64];
            int n = snprintf(hello, sizeof hello, "%d %d\n", rank, world);
            CW_TRY(send_all(fd.get(), hello, (size_t)n, dl, what));
            char msg[kMsgMax];
            size_t len = 0;
            CW_TRY(recv_msg(fd.get(), msg, sizeof msg, &len, dl, what));
            if (len == 0)
                return fail(CW_ERROR_INVALID_ARGUMENT,
                            "rank 0 at %s closed the connection without an id (it refused rank %d: another world "
                            "size, or the rank twice; see rank 0's error)",
                            addr, rank);
            int theirs = 0;
            char from[300];
            snprintf(from, sizeof from, "rank 0 at %s", addr);
            CW_TRY(parse_msg(msg, len, &theirs, id, from));
            return check_world(theirs, world, from);
        }
        int err = errno;
        if (err != ECONNREFUSED && err != ENOENT && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH &&
            err != EINTR)
            return fail_errno(err, "connect", addr);
        uint32_t left = dl.left();
        if (left == 0)
            return fail(CW_ERROR_TIMEOUT, "rank %d: rank 0 did not listen on %s within %u ms", rank, addr, dl.total);
        sleep_ms(left < 20 ? left : 20);
    }
}

}  // namespace

cw_status comm_bootstrap(cw_context *ctx, const cw_comm_bootstrap_settings *s, cw_comm **out) {
    Deadline dl{mono_ms(), s->timeout_ms};
    int rank = s->rank, world = s->world_size;
    if (world == 0) CW_TRY(env_int("CUWEAVE_WORLD_SIZE", &world, 1, 1 << 20));
    if (world < 1) return fail(CW_ERROR_INVALID_ARGUMENT, "world_size is %d", world);
    if (rank == -1) CW_TRY(env_int("CUWEAVE_RANK", &rank, 0, 1 << 20));
    if (rank < 0 || rank >= world)
        return fail(CW_ERROR_INVALID_ARGUMENT, "rank %d is outside [0, %d) (world size %d)", rank, world, world);
    const char *file = s->file, *addr = s->addr;
    if (!file && !addr) {
        const char *ef = getenv("CUWEAVE_COMM_FILE"), *ea = getenv("CUWEAVE_COMM_ADDR");
        file = ef && *ef ? ef : nullptr;
        addr = ea && *ea ? ea : nullptr;
    }
    if (file && addr)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "both a file (%s) and an address (%s) are given: set CUWEAVE_COMM_FILE or CUWEAVE_COMM_ADDR, "
                    "not both",
                    file, addr);
    if (!file && !addr)
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "neither CUWEAVE_COMM_FILE nor CUWEAVE_COMM_ADDR is set (nor the settings' file or addr)");
    if (file && !*file) return fail(CW_ERROR_INVALID_ARGUMENT, "the file path is empty");
    cw_comm_id id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        CW_TRY(comm_id_generate(&id));
        if (world > 1) {
            if (file)
                CW_TRY(file_publish(file, world, &id));
            else
                CW_TRY(tcp_serve(addr, world, &id, dl));
        }
    } else if (file) {
        CW_TRY(file_fetch(file, world, &id, dl));
    } else {
        CW_TRY(tcp_fetch(addr, rank, world, &id, dl));
    }
    cw_status st = comm_create_rank(ctx, &id, world, rank, dl.left(), out);
    // Every rank has the id once the join succeeded: the file has served.
    // (On failure too: a stale file would mislead a later run.)
    if (rank == 0 && file && world > 1) (void)unlink(file);
    return st;
}

}  // namespace multi
}  // namespace cw
