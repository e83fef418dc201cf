/* SPDX-License-Identifier: BSD-2-Clause */
/* cuweave's headers and the toolkit's cuda.h together, in both orders: the
 * handle types cuweave declares are the same types. */
#include <cuweave/cuweave.h>
#include <cuda.h>
#include <cuweave/context.h>

int cw_header_with_cuda(CUcontext c, CUstream s);
int cw_header_with_cuda(CUcontext c, CUstream s) {
    cw_context *ctx = NULL;
    CUcontext back = c;
    (void)s;
    if (cw_context_wrap(&ctx, c) != CW_SUCCESS) return 1;
    cw_context_info info;
    if (cw_context_get_info(ctx, &info) == CW_SUCCESS) back = info.handle;
    cw_context_destroy(&ctx);
    return back == c ? 0 : 1;
}
