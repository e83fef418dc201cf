/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: the bootstrap's messages (bootstrap_msg.hpp). No
// reader here calls strtol, sscanf or any function that looks for a NUL:
// each walks its bytes up to the length it is given.
#include "multi/bootstrap_msg.hpp"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace cw {
namespace multi {

namespace {

constexpr char kMagic[] = "cuweave-comm-id 1\n";
constexpr size_t kMagicLen = sizeof kMagic - 1;
constexpr char kRefused[] = "cuweave-refused ";
constexpr size_t kRefusedLen = sizeof kRefused - 1;

int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

bool token_byte(char ch) { return ch >= '!' && ch <= '~'; }

// The reason a peer is refused, into reason (cap bytes); returns refuse.
Hello refuse(char *reason, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Hello refuse(char *reason, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, cap < kReasonMax + 1 ? cap : kReasonMax + 1, fmt, ap);
    va_end(ap);
    return Hello::refuse;
}

}  // namespace

bool parse_decimal(const char *p, size_t n, long max, long *value, size_t *used) {
    size_t i = 0;
    long v = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        if (i == 1 && p[0] == '0') return false;  // a leading zero
        v = v * 10 + (p[i] - '0');
        if (v > max) return false;  // before it can overflow: max < LONG_MAX / 10
        i++;
    }
    if (i == 0) return false;
    *value = v;
    *used = i;
    return true;
}

size_t id_msg_format(char *buf, int world, const cw_comm_id *id) {
    int n = snprintf(buf, kIdMsgMax, "%s%d\n", kMagic, world);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < CW_COMM_ID_BYTES; i++) {
        buf[n++] = hex[id->bytes[i] >> 4];
        buf[n++] = hex[id->bytes[i] & 15];
    }
    buf[n++] = '\n';
    return (size_t)n;
}

cw_status id_msg_parse(const char *buf, size_t len, int *world, cw_comm_id *id, const char *from) {
    if (len < kMagicLen || memcmp(buf, kMagic, kMagicLen) != 0)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s does not hold a cuweave communicator id (no \"%.*s\" line)", from,
                    (int)kMagicLen - 1, kMagic);
    size_t at = kMagicLen, used = 0;
    long w = 0;
    if (!parse_decimal(buf + at, len - at, kWorldMax, &w, &used) || w < 1 || at + used >= len ||
        buf[at + used] != '\n')
        return fail(CW_ERROR_INVALID_ARGUMENT,
                    "%s: the world size line is malformed (a number in [1, %d] and a newline)", from, kWorldMax);
    at += used + 1;
    for (int i = 0; i < CW_COMM_ID_BYTES; i++, at += 2) {
        if (len - at < 2) return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the id is cut short", from);
        int hi = hexval(buf[at]), lo = hexval(buf[at + 1]);
        if (hi < 0 || lo < 0)
            return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the id is not %d lowercase hexadecimal digits", from,
                        2 * CW_COMM_ID_BYTES);
        id->bytes[i] = (uint8_t)(hi * 16 + lo);
    }
    if (at == len)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the id is cut short (no newline after it)", from);
    if (buf[at] != '\n' || at + 1 != len)
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s: the id line does not end after its %d digits", from,
                    2 * CW_COMM_ID_BYTES);
    *world = (int)w;
    return CW_SUCCESS;
}

cw_status token_check(const char *token, const char *what, size_t *len) {
    *len = 0;
    if (!token || !*token) return CW_SUCCESS;
    size_t n = 0;
    while (n <= kTokenMax && token[n]) {
        if (!token_byte(token[n]))
            return fail(CW_ERROR_INVALID_ARGUMENT,
                        "the token (%s) has a byte that is not a printable character other than space (byte %zu)",
                        what, n);
        n++;
    }
    if (n > kTokenMax)
        return fail(CW_ERROR_INVALID_ARGUMENT, "the token (%s) is longer than %zu bytes", what, kTokenMax);
    *len = n;
    return CW_SUCCESS;
}

bool token_equal(const char *a, size_t an, const char *b, size_t bn) {
    // Over kTokenMax bytes whatever the lengths, every byte read: the time
    // says nothing of where the tokens differ. (Both lengths are at most
    // kTokenMax: the caller's are checked, a peer's come from a hello.)
    volatile unsigned char diff = (unsigned char)(an != bn);
    for (size_t i = 0; i < kTokenMax; i++) {
        unsigned char x = i < an ? (unsigned char)a[i] : 0, y = i < bn ? (unsigned char)b[i] : 0;
        diff = (unsigned char)(diff | (x ^ y));
    }
    return diff == 0;
}

size_t hello_format(char *buf, int rank, int world, const char *token, size_t token_len) {
    int n = token_len ? snprintf(buf, kHelloMax, "%d %d %.*s\n", rank, world, (int)token_len, token)
                      : snprintf(buf, kHelloMax, "%d %d\n", rank, world);
    return (size_t)n;
}

Hello hello_judge(const char *in, size_t n, int world, const char *token, size_t token_len,
                  const unsigned char *taken, int *rank, char *reason, size_t cap) {
    const char *nl = static_cast<const char *>(memchr(in, '\n', n));
    if (!nl) {
        if (n < kHelloMax) return Hello::more;
        return refuse(reason, cap, "the hello is longer than %zu bytes", kHelloMax);
    }
    const size_t line = (size_t)(nl - in);  // the bytes before the newline
    if (line + 1 != n) return refuse(reason, cap, "bytes follow the hello");
    long r = 0, w = 0;
    size_t at = 0, used = 0;
    if (!parse_decimal(in, line, kWorldMax, &r, &used) || used == line || in[used] != ' ')
        return refuse(reason, cap, "the hello is malformed (not \"rank world\")");
    at = used + 1;
    if (!parse_decimal(in + at, line - at, kWorldMax, &w, &used))
        return refuse(reason, cap, "the hello is malformed (not \"rank world\")");
    at += used;
    const char *their = nullptr;
    size_t their_len = 0;
    if (at < line) {
        if (in[at] != ' ' || at + 1 == line) return refuse(reason, cap, "the hello is malformed (not \"rank world\")");
        their = in + at + 1;
        their_len = line - at - 1;
        if (their_len > kTokenMax) return refuse(reason, cap, "the token is longer than %zu bytes", kTokenMax);
        for (size_t i = 0; i < their_len; i++)
            if (!token_byte(their[i])) return refuse(reason, cap, "the token has a byte that is not allowed");
    }
    // The token first: a peer without it learns nothing of this world.
    if (token_len && !their_len) return refuse(reason, cap, "no token: rank 0 requires one");
    if (!token_len && their_len) return refuse(reason, cap, "a token: rank 0 has none");
    if (token_len && !token_equal(token, token_len, their, their_len)) return refuse(reason, cap, "the token is wrong");
    if (w != world) return refuse(reason, cap, "world size %ld, rank 0 has %d: the ranks disagree", w, world);
    if (r < 1 || r >= world) return refuse(reason, cap, "rank %ld is outside [1, %d)", r, world);
    if (taken[r])
        return refuse(reason, cap,
                      "rank %ld has already joined (another process took it: two processes with one rank, or one "
                      "impersonating it)",
                      r);
    *rank = (int)r;
    return Hello::accept;
}

size_t refusal_format(char *buf, const char *reason) {
    return (size_t)snprintf(buf, kReplyMax, "%s%.*s\n", kRefused, (int)kReasonMax, reason);
}

bool reply_complete(const char *buf, size_t n) {
    if (n >= kRefusedLen && memcmp(buf, kRefused, kRefusedLen) == 0) return memchr(buf, '\n', n) != nullptr;
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    return lines >= 3;
}

cw_status reply_parse(const char *buf, size_t len, int rank, int *world, cw_comm_id *id, const char *from) {
    if (len >= kRefusedLen && memcmp(buf, kRefused, kRefusedLen) == 0) {
        const char *reason = buf + kRefusedLen;
        size_t rl = len - kRefusedLen;
        bool ok = rl >= 2 && rl - 1 <= kReasonMax && reason[rl - 1] == '\n';
        for (size_t i = 0; ok && i + 1 < rl; i++) ok = reason[i] >= ' ' && reason[i] <= '~';
        if (!ok) return fail(CW_ERROR_INVALID_ARGUMENT, "%s refused rank %d, with a malformed reason", from, rank);
        return fail(CW_ERROR_INVALID_ARGUMENT, "%s refused rank %d: %.*s", from, rank, (int)(rl - 1), reason);
    }
    return id_msg_parse(buf, len, world, id, from);
}

}  // namespace multi
}  // namespace cw
