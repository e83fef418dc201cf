/* SPDX-License-Identifier: BSD-2-Clause */
// cuweave core: the shared-memory blocks of exported objects and the bytes
// of their handles (share_block.cpp), for share.cpp.
//
// An exported object has a block in POSIX shared memory named
// "/cuweave.<pid>.<serial>.<nonce>" (the exporter's process, a number of
// its own, 64 random bits), 0600. Its header, written once by the
// exporter, repeats the pid and the nonce and holds the exporter's user,
// the object's kind and size; its slots hold the pids of the processes
// that imported it; the first export adds the device's UUID and the
// driver's handle. A handle carries what names the block, and an import
// checks the block against it (block_open).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/share.hpp"

namespace cw {
namespace core {

constexpr uint8_t kKindBuffer = 1, kKindEvent = 2;
constexpr size_t kNameMax = 48;  // "/cuweave.<int>.<uint>.<16 hex>"

struct Block;

struct Share {
    bool exporter;
    uint8_t kind;
    Block *block;
    uint32_t serial;
    uint64_t nonce;
    char name[kNameMax];
    Share *next_export;  // the process's exported blocks (exporter only)
};

// A cw_shared_handle's bytes.
struct HandleBytes {
    uint32_t magic;
    uint8_t version;
    uint8_t kind;
    uint8_t pad[2];        // 0
    int32_t pid;           // the exporter's process
    uint32_t serial;       // the block's number in that process (from 1)
    uint8_t uuid[16];      // the device's
    uint64_t bytes;        // a buffer's size, 0 for an event
    char ipc[64];          // CUipcMemHandle or CUipcEventHandle
    uint64_t nonce;        // the block's, never 0
    uint8_t reserved[16];  // 0
};
static_assert(sizeof(HandleBytes) == sizeof(cw_shared_handle), "a handle's layout fills its bytes");
// tests/test_share_cpu.c forges handles at these offsets.
static_assert(offsetof(HandleBytes, pid) == 8 && offsetof(HandleBytes, bytes) == 32 &&
                  offsetof(HandleBytes, ipc) == 40 && offsetof(HandleBytes, nonce) == 104,
              "the handle's layout as the tests know it");

// The exporter's side: a new block for an object of kind and size (0 for
// an event), named in the process's list of exports (removed at exit);
// its name removed (no import from then on); the block freed (its name
// too).
cw_status block_create(uint8_t kind, uint64_t bytes, Share **out);
void block_unname(Share *sh);
void block_free(Share *sh);
// Processes holding the object now (slots of processes gone are cleared).
int block_holders(Share *sh);
// The handle of sh's object (this process's): uuid, size and the driver's
// handle (64 bytes) given. The first call writes the uuid and the driver's
// handle into the block (an import checks them); every handle carries
// those first ones.
void handle_make(const Share *sh, const CUuuid &uuid, uint64_t bytes, const void *ipc, HandleBytes *out);

// The importer's side: checks a handle, opens its block and takes a slot
// (see share_block.cpp for the checks); leave gives the slot back.
cw_status block_open(const HandleBytes &h, uint8_t kind, const CUuuid &uuid, Share **out);
void block_leave(Share *sh);

// Runs the testing hook (share.hpp) at point.
void share_hook(int point);

}  // namespace core
}  // namespace cw
