# SPDX-License-Identifier: BSD-2-Clause
"""Contexts, streams, pools, futures and timers. Time is in seconds:
None waits without limit, 0 only tries."""
import asyncio

import cuweave

with cuweave.Context(0) as ctx:                # the primary context of device 0
    a, b = cuweave.Stream(ctx), cuweave.Stream(ctx, priority=-1)
    print(a)                                  # <cuweave.Stream 0x... device 0 non-blocking>
    b.wait(a)                                 # b's later work waits (on the GPU) for a's
    with b.fork() as side:                    # side runs after b's work so far; joined at the end
        side.wait(a)

    pool = cuweave.StreamPool(ctx, max_streams=1)
    with pool.acquire() as s:                 # a lease, given back at the end of the block
        try:
            pool.acquire(timeout=0.01)        # the only stream is out: waits 10 ms for it
        except cuweave.CuweaveTimeoutError:   # a TimeoutError too
            print("no stream within 10 ms")
        s.wait(b)

    done = cuweave.Future(b)                  # completes when b's work so far has
    done.wait(timeout=1.0)                    # or wait() without limit, or wait(0): only check
    print("done:", done.poll(), done)

    async def main() -> None:
        f = cuweave.Future(a, cuweave.FutureKind.EVENT)
        await f                               # asyncio waits on the future's eventfd
    asyncio.run(main())

    t = cuweave.Timer(ctx)
    t.start(a)
    t.stop(a)
    print("GPU time: %.6f s" % t.elapsed())
    for x in (a, b, pool, done, t):
        x.close()
