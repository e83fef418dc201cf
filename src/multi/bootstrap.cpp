/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: the common bootstrap of a communicator by rank
// (collective.hpp, comm_bootstrap). Rank 0 makes the id and publishes it
// with the world size, through a file (written to a temporary of an
// unpredictable name beside it, mode 0600, then renamed) or a TCP socket
// (rank 0 listens and serves every connection at once, each within its own
// deadline, refusing what is not a rank of this world with the token; the
// others connect with retries); every rank then joins with
// comm_create_rank. The timeout bounds the whole call (a host name is
// looked up on a thread of its own, waited for within it). The messages
// are made and read in bootstrap_msg.cpp.
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/sync.hpp"
#include "multi/bootstrap_msg.hpp"
#include "multi/collective.hpp"

namespace cw {
namespace multi {

namespace {

// A peer's whole exchange with rank 0 (its hello, rank 0's reply), from the
// moment rank 0 accepts it: a peer silent or slow past it is dropped.
constexpr uint32_t kPeerMs = 5000;
// Connections rank 0 holds at once (past the one just accepted). It never
// stops accepting: one that is let wait in the listen backlog fills it,
// and a genuine rank's connection is then dropped by the kernel, again and
// again while a flood lasts. So at the cap the oldest connection that has
// not sent its hello, once it has had kPeerMinMs, makes room for the next;
// one that finds every place held by younger ones is closed at once (a
// rank whose connection closes without a reply connects again).
constexpr int kPeersMax = 64;
constexpr uint32_t kPeerMinMs = 200;
// Refusals rank 0 logs (CW_LOG_WARNING) in one bootstrap; the rest are
// counted in the detail of a timeout.
constexpr unsigned kRefusalsLogged = 8;

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

int poll_ms(uint64_t ms) { return ms > 0x7fffffff ? 0x7fffffff : (int)ms; }

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

cw_status check_world(int theirs, int ours, const char *from) {
    if (theirs != ours)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s has world size %d, this rank %d: the ranks disagree", from, theirs,
                    ours);
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
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }

  private:
    int fd_;
};

// ---- file ------------------------------------------------------------------

// Writes the id to a temporary of an unpredictable name beside path
// (mkostemp: created here, O_EXCL, so a link or file planted there is never
// opened; mode 0600, the user's alone), then renames it to path.
cw_status file_publish(const char *path, int world, const cw_comm_id *id) {
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof tmp) return fail(CW_ERROR_INVALID_ARGUMENT, "the file path is too long");
    char msg[kIdMsgMax];
    size_t len = id_msg_format(msg, world, id);
    Fd fd(mkostemp(tmp, O_CLOEXEC));
    if (fd.get() < 0) return fail_errno(errno, "mkostemp", tmp);
    cw_status st = CW_SUCCESS;
    if (fchmod(fd.get(), 0600) != 0) st = fail_errno(errno, "fchmod", tmp);
    for (size_t done = 0; st == CW_SUCCESS && done < len;) {
        ssize_t w = write(fd.get(), msg + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) st = fail_errno(w < 0 ? errno : EIO, "write", tmp);
        else done += (size_t)w;
    }
    if (st == CW_SUCCESS && close(fd.release()) != 0) st = fail_errno(errno, "close", tmp);
    if (st == CW_SUCCESS && rename(tmp, path) != 0) st = fail_errno(errno, "rename", path);
    if (st != CW_SUCCESS) (void)unlink(tmp);
    return st;
}

// Reads the id rank 0 wrote at path, polling until it appears. What is
// there must be a regular file of this user: the open neither follows a
// link nor waits (a FIFO opens at once, and is refused).
cw_status file_fetch(const char *path, int world, cw_comm_id *id, const Deadline &dl) {
    char from[4200];
    snprintf(from, sizeof from, "the file %s", path);
    for (;;) {
        Fd fd(open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
        if (fd.get() >= 0) {
            struct stat st;
            if (fstat(fd.get(), &st) != 0) return fail_errno(errno, "fstat", path);
            if (!S_ISREG(st.st_mode))
                return fail(CW_ERROR_INVALID_ARGUMENT, "%s is not a regular file (rank 0 writes one there)", from);
            if (st.st_uid != geteuid())
                return fail(CW_ERROR_INVALID_ARGUMENT,
                            "%s is owned by uid %u, not by this user (uid %u): not one rank 0 wrote", from,
                            (unsigned)st.st_uid, (unsigned)geteuid());
            char msg[kIdMsgMax + 1];  // one byte more: a longer file is not an id
            size_t len = 0;
            while (len < sizeof msg) {
                ssize_t r = read(fd.get(), msg + len, sizeof msg - len);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0) return fail_errno(errno, "read", path);
                if (r == 0) break;
                len += (size_t)r;
            }
            if (len > kIdMsgMax)
                return fail(CW_ERROR_INVALID_ARGUMENT, "%s does not hold a cuweave communicator id (longer than %zu bytes)",
                            from, kIdMsgMax);
            int theirs = 0;
            CW_TRY(id_msg_parse(msg, len, &theirs, id, from));
            return check_world(theirs, world, from);
        }
        if (errno == ELOOP)
            return fail(CW_ERROR_INVALID_ARGUMENT, "%s is a symbolic link: refused (rank 0 writes a regular file there)",
                        from);
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
        int r = poll(&p, 1, poll_ms(dl.left()));
        if (r > 0) return CW_SUCCESS;
        if (r == 0) return fail(CW_ERROR_TIMEOUT, "%s: nothing within %u ms", what, dl.total);
        if (errno != EINTR) return fail_errno(errno, "poll", what);
    }
}

// *gone: the failure was rank 0 closing or resetting the connection.
cw_status send_all(int fd, const char *buf, size_t len, const Deadline &dl, const char *what, bool *gone) {
    size_t done = 0;
    while (done < len) {
        CW_TRY(wait_fd(fd, POLLOUT, dl, what));
        ssize_t w = send(fd, buf + done, len - done, MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w < 0) *gone = errno == EPIPE || errno == ECONNRESET;
        if (w <= 0) return fail_errno(errno, "send", what);
        done += (size_t)w;
    }
    return CW_SUCCESS;
}

// Reads rank 0's reply: until it is whole (reply_complete), rank 0 closes,
// or kReplyMax + 1 bytes came (more than any reply). *gone as send_all's.
cw_status recv_reply(int fd, char *buf, size_t cap, size_t *len, const Deadline &dl, const char *what, bool *gone) {
    size_t n = 0;
    while (n < cap && !reply_complete(buf, n)) {
        CW_TRY(wait_fd(fd, POLLIN, dl, what));
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) *gone = n == 0 && errno == ECONNRESET;
        if (r < 0) return fail_errno(errno, "recv", what);
        if (r == 0) break;
        n += (size_t)r;
    }
    *len = n;
    return CW_SUCCESS;
}

class AddrInfo {
  public:
    ~AddrInfo() {
        if (ai) freeaddrinfo(ai);
    }
    struct addrinfo *ai = nullptr;
};

// A name's lookup, on a thread of its own: getaddrinfo has no timeout (a
// name server that does not answer holds it for the resolver's timeouts
// and attempts, 10 s and more by default), so the caller waits for it up to
// its deadline only; the last of the two to let go frees it.
struct Lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;  // under mu: the caller's and the thread's
    bool done;
    int rc;
    struct addrinfo *ai;
    char host[256], port[16];
};

void lookup_release(Lookup *lk) {
    pthread_mutex_lock(&lk->mu);
    const bool last = --lk->refs == 0;
    pthread_mutex_unlock(&lk->mu);
    if (!last) return;
    if (lk->ai) freeaddrinfo(lk->ai);
    pthread_cond_destroy(&lk->cv);
    pthread_mutex_destroy(&lk->mu);
    free(lk);
}

struct addrinfo stream_hints(int flags) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    return hints;
}

void *lookup_main(void *arg) {
    Lookup *lk = static_cast<Lookup *>(arg);
    const struct addrinfo hints = stream_hints(AI_NUMERICSERV);
    struct addrinfo *ai = nullptr;
    const int rc = getaddrinfo(lk->host, lk->port, &hints, &ai);
    pthread_mutex_lock(&lk->mu);
    lk->rc = rc;
    lk->ai = ai;
    lk->done = true;
    pthread_cond_signal(&lk->cv);
    pthread_mutex_unlock(&lk->mu);
    lookup_release(lk);
    return nullptr;
}

// The address given (no wildcard is made of it: rank 0 binds that
// address): a number at once; a name looked up within the deadline.
cw_status resolve(const char *addr, AddrInfo *out, const Deadline &dl) {
    char host[256], port[16];
    CW_TRY(split_addr(addr, host, sizeof host, port, sizeof port));
    const struct addrinfo numeric = stream_hints(AI_NUMERICSERV | AI_NUMERICHOST);
    int r = getaddrinfo(host, port, &numeric, &out->ai);
    if (r == 0 && out->ai) return CW_SUCCESS;
    if (r != EAI_NONAME)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the address \"%s\" does not resolve: %s", addr, gai_strerror(r));
    Lookup *lk = static_cast<Lookup *>(calloc(1, sizeof(Lookup)));
    if (!lk) return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    copy_text(lk->host, sizeof lk->host, host);
    copy_text(lk->port, sizeof lk->port, port);
    pthread_mutex_init(&lk->mu, nullptr);
    cond_init_monotonic(&lk->cv);
    lk->refs = 2;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;  // the thread takes no signal of the program's
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    const int cr = pthread_create(&t, &a, lookup_main, lk);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&a);
    if (cr != 0) {
        lk->refs = 1;
        lookup_release(lk);
        return fail(CW_ERROR_OUT_OF_MEMORY, "could not start a thread to look %s up (%s)", host, strerror(cr));
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    const uint32_t left = dl.left();
    until.tv_sec += left / 1000;
    until.tv_nsec += (long)(left % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&lk->mu);
    while (!lk->done && pthread_cond_timedwait(&lk->cv, &lk->mu, &until) != ETIMEDOUT) {
    }
    const bool done = lk->done;
    r = lk->rc;
    if (done) {
        out->ai = lk->ai;
        lk->ai = nullptr;
    }
    pthread_mutex_unlock(&lk->mu);
    lookup_release(lk);
    if (!done)
        return fail(CW_ERROR_TIMEOUT,
                    "the address \"%s\": %s did not resolve within %u ms (its name server did not answer in time)",
                    addr, host, dl.total);
    if (r != 0 || !out->ai)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the address \"%s\" does not resolve: %s", addr, gai_strerror(r));
    return CW_SUCCESS;
}

// One connection rank 0 serves: what the peer sent, then rank 0's reply.
struct Peer {
    int fd;
    uint64_t accepted;   // mono_ms
    uint64_t deadline;   // mono_ms
    size_t n;            // bytes of in
    size_t out_n;        // bytes of the reply (0: still reading)
    size_t out_done;
    int rank;            // the rank the id is sent to; -1: a refusal
    char in[kHelloMax];
    char out[kReplyMax];
};

struct Server {
    const char *addr;
    int world;
    const char *token;
    size_t token_len;
    unsigned char *taken;  // [world]: 1 while the id is sent to that rank, 2 once sent
    char id_msg[kIdMsgMax];
    size_t id_len;
    int served;
    unsigned refused, dropped;
    char last[kReasonMax + 1];  // the last refusal's reason
    Peer peers[kPeersMax + 1];  // + 1: the one just accepted, until it has a place
    int npeers;
};

void peer_close(Server *sv, int i) {
    Peer &p = sv->peers[i];
    if (p.rank >= 0 && sv->taken[p.rank] == 1) sv->taken[p.rank] = 0;  // not answered: that rank may come again
    close(p.fd);
    sv->peers[i] = sv->peers[--sv->npeers];
}

// Judges what peer i has sent (eof: it sent no more), queueing the reply.
void peer_judge(Server *sv, int i, bool eof) {
    Peer &p = sv->peers[i];
    char reason[kReasonMax + 1];
    int rank = -1;
    Hello h = hello_judge(p.in, p.n, sv->world, sv->token, sv->token_len, sv->taken, &rank, reason, sizeof reason);
    if (h == Hello::more && !eof) return;
    if (h == Hello::more) snprintf(reason, sizeof reason, "the hello is cut short (no newline)");
    if (h == Hello::accept) {
        sv->taken[rank] = 1;
        p.rank = rank;
        memcpy(p.out, sv->id_msg, sv->id_len);
        p.out_n = sv->id_len;
        return;
    }
    sv->refused++;
    copy_text(sv->last, sizeof sv->last, reason);
    if (sv->refused <= kRefusalsLogged) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
        if (getpeername(p.fd, (struct sockaddr *)&sa, &sl) == 0)
            (void)getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, serv, sizeof serv,
                              NI_NUMERICHOST | NI_NUMERICSERV);
        log(CW_LOG_WARNING, "cw_comm_bootstrap: rank 0 on %s refused a connection from %s port %s: %s%s", sv->addr, host,
            serv, reason, sv->refused == kRefusalsLogged ? " (further refusals are not logged)" : "");
    }
    p.out_n = refusal_format(p.out, reason);
}

// Reads what peer i sent (POLLIN); false when it is to be closed.
bool peer_read(Server *sv, int i) {
    Peer &p = sv->peers[i];
    for (;;) {
        ssize_t r = recv(p.fd, p.in + p.n, sizeof p.in - p.n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) return true;
        if (r < 0) return false;  // reset: gone
        if (r > 0) p.n += (size_t)r;
        peer_judge(sv, i, r == 0);
        return true;
    }
}

// Sends peer i's reply (POLLOUT); false when it is to be closed (answered,
// or gone).
bool peer_write(Server *sv, int i) {
    Peer &p = sv->peers[i];
    for (;;) {
        ssize_t w = send(p.fd, p.out + p.out_done, p.out_n - p.out_done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return true;
        if (w <= 0) return false;
        p.out_done += (size_t)w;
        if (p.out_done < p.out_n) return true;
        if (p.rank >= 0) {
            sv->taken[p.rank] = 2;
            sv->served++;
        }
        return false;
    }
}

// Makes room: closes the oldest connection, other than `except`, that is
// still reading its hello and has had kPeerMinMs; false when there is none.
bool make_room(Server *sv, uint64_t now, int except) {
    int oldest = -1;
    for (int i = 0; i < sv->npeers; i++) {
        const Peer &p = sv->peers[i];
        if (i == except || p.out_n || now - p.accepted < kPeerMinMs) continue;
        if (oldest < 0 || p.accepted < sv->peers[oldest].accepted) oldest = i;
    }
    if (oldest < 0) return false;
    sv->dropped++;
    peer_close(sv, oldest);
    return true;
}

// Takes the connections waiting (kPeersMax at most in one go, so the ones
// accepted before are served in between). Each is read at once (a rank's
// hello is there by then, as a rule: then it is answered and closed without
// holding a place); one still reading takes a place, made at the cap by
// make_room, or is closed. Returns false when accept failed for want of
// descriptors or memory and no connection could give its descriptor up
// (then the caller stops accepting for a while: poll would report the
// listener again at once).
bool accept_peers(Server *sv, int ls, cw_status *st) {
    for (int k = 0; k < kPeersMax && sv->served < sv->world - 1; k++) {
        int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        const uint64_t now = mono_ms();
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EAGAIN) return true;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (make_room(sv, now, -1)) continue;
                return false;
            }
            *st = fail_errno(errno, "accept", sv->addr);
            return true;
        }
        const int i = sv->npeers++;
        Peer &p = sv->peers[i];
        p.fd = fd;
        p.accepted = now;
        p.deadline = now + kPeerMs;
        p.n = p.out_n = p.out_done = 0;
        p.rank = -1;
        bool keep = peer_read(sv, i);
        if (keep && p.out_n) keep = peer_write(sv, i);
        if (!keep) {
            peer_close(sv, i);
        } else if (sv->npeers > kPeersMax && !make_room(sv, now, i)) {
            sv->dropped++;  // every place is held by younger ones: this one goes (a rank connects again)
            peer_close(sv, i);
        }
    }
    return true;
}

cw_status serve_loop(Server *sv, int ls, const Deadline &dl) {
    struct pollfd pfd[kPeersMax + 1];
    uint64_t accept_at = 0;  // accepting paused until then (out of descriptors)
    cw_status st = CW_SUCCESS;
    while (sv->served < sv->world - 1 && st == CW_SUCCESS) {
        const uint64_t now = mono_ms();
        const uint32_t left = dl.left();
        // Peers past their deadline: dropped (the rank of one being sent the
        // id is free again).
        for (int i = sv->npeers - 1; i >= 0; i--)
            if (now >= sv->peers[i].deadline) {
                sv->dropped++;
                peer_close(sv, i);
            }
        if (left == 0) {
            char more[2 * kReasonMax + 160] = "";
            int m = 0;
            if (sv->refused)
                m = snprintf(more, sizeof more, "; %u connection(s) refused, the last: %s", sv->refused, sv->last);
            if (sv->dropped && m >= 0 && (size_t)m < sizeof more)
                snprintf(more + m, sizeof more - (size_t)m,
                         "; %u dropped (not done within %u ms, or making room for others)", sv->dropped, kPeerMs);
            return fail(CW_ERROR_TIMEOUT, "rank 0 on %s: %d of the %d other ranks came within %u ms%s", sv->addr,
                        sv->served, sv->world - 1, dl.total, more);
        }
        uint64_t wait = left;
        int np = 0;
        const bool listening = now >= accept_at;
        if (listening) pfd[np++] = {ls, POLLIN, 0};
        else if (accept_at - now < wait) wait = accept_at - now;
        for (int i = 0; i < sv->npeers; i++) {
            pfd[np++] = {sv->peers[i].fd, (short)(sv->peers[i].out_n ? POLLOUT : POLLIN), 0};
            if (sv->peers[i].deadline - now < wait) wait = sv->peers[i].deadline - now;
        }
        int r = poll(pfd, (nfds_t)np, poll_ms(wait));
        if (r < 0 && errno != EINTR) return fail_errno(errno, "poll", sv->addr);
        if (r <= 0) continue;
        // The peers first (pfd[k] is peer k - listening, the order of the
        // array before any closes: walked backwards, as peer_close moves the
        // last peer into the closed one's place).
        for (int i = sv->npeers - 1; i >= 0; i--) {
            const short ev = pfd[i + (listening ? 1 : 0)].revents;
            if (!ev) continue;
            Peer &p = sv->peers[i];
            bool keep;
            if (p.out_n) keep = peer_write(sv, i);
            else keep = (ev & (POLLIN | POLLHUP | POLLERR)) ? peer_read(sv, i) : true;
            // A reply just queued goes out now (it fits the socket's buffer).
            if (keep && p.out_n && !p.out_done) keep = peer_write(sv, i);
            if (!keep) peer_close(sv, i);
        }
        if (listening && (pfd[0].revents & POLLIN) && !accept_peers(sv, ls, &st)) accept_at = mono_ms() + 50;
    }
    return st;
}

// Rank 0: listens on addr and answers the world - 1 other ranks once each.
cw_status tcp_serve(const char *addr, int world, const char *token, size_t token_len, const cw_comm_id *id,
                    const Deadline &dl) {
    AddrInfo ai;
    CW_TRY(resolve(addr, &ai, dl));
    Fd ls(socket(ai.ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (ls.get() < 0) return fail_errno(errno, "socket", addr);
    int one = 1;
    (void)setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls.get(), ai.ai->ai_addr, ai.ai->ai_addrlen) != 0) return fail_errno(errno, "bind", addr);
    // The longest backlog the system gives (net.core.somaxconn): a flood has
    // to fill it before the kernel drops a rank's connection.
    if (listen(ls.get(), SOMAXCONN) != 0) return fail_errno(errno, "listen", addr);
    Server *sv = static_cast<Server *>(calloc(1, sizeof(Server)));
    unsigned char *taken = static_cast<unsigned char *>(calloc((size_t)world, 1));
    if (!sv || !taken) {
        free(sv);
        free(taken);
        return fail(CW_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
    sv->addr = addr;
    sv->world = world;
    sv->token = token;
    sv->token_len = token_len;
    sv->taken = taken;
    sv->id_len = id_msg_format(sv->id_msg, world, id);
    cw_status st = serve_loop(sv, ls.get(), dl);
    while (sv->npeers > 0) peer_close(sv, sv->npeers - 1);
    free(taken);
    free(sv);
    return st;
}

// Another rank: connects to rank 0 (retrying until it listens, and when it
// closes the connection without a word: busy), says its hello and reads
// the reply: the id, or why rank 0 refused it.
cw_status tcp_fetch(const char *addr, int rank, int world, const char *token, size_t token_len, cw_comm_id *id,
                    const Deadline &dl) {
    AddrInfo ai;
    CW_TRY(resolve(addr, &ai, dl));
    char what[320];
    snprintf(what, sizeof what, "rank %d reading the id from rank 0 at %s", rank, addr);
    unsigned closed = 0;  // connections rank 0 closed without a reply
    for (;;) {
        // Non-blocking: an unreachable host does not hold the call past the
        // deadline (a blocking connect waits for the kernel's own timeout).
        Fd fd(socket(ai.ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (fd.get() < 0) return fail_errno(errno, "socket", addr);
        int cr = connect(fd.get(), ai.ai->ai_addr, ai.ai->ai_addrlen);
        if (cr != 0 && errno == EINPROGRESS) {
            struct pollfd p = {fd.get(), POLLOUT, 0};
            int pr = poll(&p, 1, poll_ms(dl.left()));
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (pr > 0 && getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) {
                cr = 0;
            } else {
                errno = pr == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            }
        }
        bool gone = false;
        if (cr == 0) {
            char hello[kHelloMax];
            size_t n = hello_format(hello, rank, world, token, token_len);
            char msg[kReplyMax + 1];
            size_t len = 0;
            cw_status xs = send_all(fd.get(), hello, n, dl, what, &gone);
            if (xs == CW_SUCCESS) xs = recv_reply(fd.get(), msg, sizeof msg, &len, dl, what, &gone);
            if (xs == CW_SUCCESS && len == 0) gone = true;
            if (!gone) {
                CW_TRY(xs);
                int theirs = 0;
                char from[300];
                snprintf(from, sizeof from, "rank 0 at %s", addr);
                CW_TRY(reply_parse(msg, len, rank, &theirs, id, from));
                return check_world(theirs, world, from);
            }
            closed++;
        } else {
            int err = errno;
            if (err != ECONNREFUSED && err != ENOENT && err != ETIMEDOUT && err != EHOSTUNREACH &&
                err != ENETUNREACH && err != EINTR)
                return fail_errno(err, "connect", addr);
        }
        uint32_t left = dl.left();
        if (left == 0 && closed)
            return fail(CW_ERROR_TIMEOUT,
                        "rank %d: rank 0 at %s closed the connection without a reply, %u time(s), and gave no id "
                        "within %u ms (busy with other connections; or it had answered every rank and closed it: "
                        "then another process took rank %d; or not a cuweave rank 0 of this version)",
                        rank, addr, closed, dl.total, rank);
        if (left == 0)
            return fail(CW_ERROR_TIMEOUT,
                        "rank %d: rank 0 did not listen on %s within %u ms (not started; or it had answered every "
                        "rank and closed it: then another process took rank %d)",
                        rank, addr, dl.total, rank);
        sleep_ms(left < 20 ? left : 20);
    }
}

}  // namespace

cw_status id_file_read(const char *path, int world, uint32_t timeout_ms, cw_comm_id *id) {
    Deadline dl{mono_ms(), timeout_ms};
    return file_fetch(path, world, id, dl);
}

cw_status comm_bootstrap(cw_context *ctx, const cw_comm_bootstrap_settings *s, cw_comm **out) {
    Deadline dl{mono_ms(), s->timeout_ms};
    int rank = s->rank, world = s->world_size;
    if (world == 0) CW_TRY(env_int("CUWEAVE_WORLD_SIZE", &world, 1, kWorldMax));
    if (world < 1 || world > kWorldMax)
        return fail(CW_ERROR_INVALID_ARGUMENT, "world_size is %d (at most %d)", world, kWorldMax);
    if (rank == -1) CW_TRY(env_int("CUWEAVE_RANK", &rank, 0, kWorldMax));
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
    // The token (TCP only): the settings', else CUWEAVE_COMM_TOKEN's.
    const char *token = s->token ? s->token : getenv("CUWEAVE_COMM_TOKEN");
    size_t token_len = 0;
    if (addr) CW_TRY(token_check(token, s->token ? "settings.token" : "CUWEAVE_COMM_TOKEN", &token_len));
    cw_comm_id id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        CW_TRY(comm_id_generate(&id));
        if (world > 1) {
            if (file)
                CW_TRY(file_publish(file, world, &id));
            else
                CW_TRY(tcp_serve(addr, world, token, token_len, &id, dl));
        }
    } else if (file) {
        CW_TRY(file_fetch(file, world, &id, dl));
    } else {
        CW_TRY(tcp_fetch(addr, rank, world, token, token_len, &id, dl));
    }
    cw_status st = comm_create_rank(ctx, &id, world, rank, dl.left(), out);
    // Every rank has the id once the join succeeded: the file has served.
    // (On failure too: a stale file would mislead a later run.)
    if (rank == 0 && file && world > 1) (void)unlink(file);
    return st;
}

}  // namespace multi
}  // namespace cw
