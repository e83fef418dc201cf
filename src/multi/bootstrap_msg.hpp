/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave multi layer: the bootstrap's messages (bootstrap_msg.cpp), made
// and read here only, every reader bounded by an explicit length (the bytes
// come from other processes: a file, a socket) and strict: it accepts what
// the writer beside it makes and nothing else, so an accepted message
// written again gives the same bytes (what the fuzzers check).
//
//   the id (rank 0 to the others, by file or TCP):
//       "cuweave-comm-id 1\n" <world> "\n" <256 lowercase hex digits> "\n"
//   a hello (another rank to rank 0, TCP):
//       <rank> " " <world> "\n"   or   <rank> " " <world> " " <token> "\n"
//   a refusal (rank 0 to a peer it does not answer with the id, TCP):
//       "cuweave-refused " <reason: 1..kReasonMax printable bytes> "\n"
// Numbers are decimal, digits only, no leading zero; a token is 1..kTokenMax
// bytes from '!' to '~' (no spaces, no control bytes).
#pragma once

#include <stddef.h>

#include "driver/error.hpp"
#include "cuweave/collective.h"

namespace cw {
namespace multi {

constexpr int kWorldMax = 1 << 20;     // ranks in a bootstrap, at most
constexpr size_t kTokenMax = 256;      // bytes of a token, at most
constexpr size_t kReasonMax = 200;     // bytes of a refusal's reason, at most
constexpr size_t kIdMsgMax = 320;      // the id message: 18 + 8 + 257 bytes at most
constexpr size_t kHelloMax = 8 + 8 + 1 + kTokenMax + 1;  // a hello, at most
constexpr size_t kReplyMax = kIdMsgMax > 16 + kReasonMax + 1 ? kIdMsgMax : 16 + kReasonMax + 1;

// A decimal number at p (n bytes there): one or more digits, no sign, no
// leading zero (but "0" itself), at most max. *used: the digits read.
bool parse_decimal(const char *p, size_t n, long max, long *value, size_t *used);

// The id message into buf (kIdMsgMax bytes); returns its length.
size_t id_msg_format(char *buf, int world, const cw_comm_id *id);
// Reads an id message of exactly len bytes; `from` names the source in the
// detail (CW_ERROR_INVALID_ARGUMENT when it is not one).
cw_status id_msg_parse(const char *buf, size_t len, int *world, cw_comm_id *id, const char *from);

// A token from the settings or the environment: NULL or "" is none (*len
// 0); else 1..kTokenMax bytes from '!' to '~' (the detail names `what`, never
// the token's bytes).
cw_status token_check(const char *token, const char *what, size_t *len);
// Whether the tokens are the same, in a time that does not depend on where
// they differ (nor on their bytes: both are compared over kTokenMax bytes).
bool token_equal(const char *a, size_t an, const char *b, size_t bn);

// The hello of rank `rank` into buf (kHelloMax bytes); token NULL: none.
size_t hello_format(char *buf, int rank, int world, const char *token, size_t token_len);

// What rank 0 makes of the n bytes a peer has sent so far.
enum class Hello {
    more,    // no newline yet, and room for more: wait
    accept,  // a rank of this world, with the token, not taken: *rank
    refuse,  // reason (NUL-terminated, at most kReasonMax bytes) says why
};
// world: rank 0's; token (token_len bytes, 0: none): rank 0's; taken[r]
// nonzero for each rank r already answered or being answered.
Hello hello_judge(const char *in, size_t n, int world, const char *token, size_t token_len,
                  const unsigned char *taken, int *rank, char *reason, size_t cap);

// The refusal line into buf (kReplyMax bytes); returns its length.
size_t refusal_format(char *buf, const char *reason);

// Whether the n bytes a rank read from rank 0 are a whole reply (an id
// message has three newlines, a refusal one): then it stops reading.
bool reply_complete(const char *buf, size_t n);
// Reads rank 0's reply (exactly len bytes): the id, or the refusal of
// `rank` (CW_ERROR_INVALID_ARGUMENT with rank 0's reason), or bytes that are
// neither (CW_ERROR_INVALID_ARGUMENT). `from` names rank 0 in the detail.
cw_status reply_parse(const char *buf, size_t len, int rank, int *world, cw_comm_id *id, const char *from);

// bootstrap.cpp: what a rank other than 0 does with the file at path (the
// checks of what is there, the read, the parse), polling up to timeout_ms
// while it is absent (for the fuzzer: src/testing/seam.h).
cw_status id_file_read(const char *path, int world, uint32_t timeout_ms, cw_comm_id *id);

}  // namespace multi
}  // namespace cw
