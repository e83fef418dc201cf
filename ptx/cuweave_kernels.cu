// The library's own kernels. Compiled at build time (nvcc: cubins for the
// architectures built for, plus PTX) or taken from the checked-in PTX next to
// this file (cuweave_kernels.ptx, made by tools/gen-ptx.sh), and embedded in
// libcuweave; loaded with the library API on first use. NVRTC is never
// needed for them. The argument lists are part of the API (cw_builtin in
// include/cuweave/jit.h).
#include <cuda_device_runtime_api.h>  // cudaGraphSetConditional, resolved by the driver at load
#include <stdint.h>

extern "C" {

// dst[i] = value for i < count; any grid shape (grid-stride loop).
__global__ void cwk_fill_u32(uint32_t *dst, uint32_t value, uint64_t count) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) dst[i] = value;
}

// *dst = value from one thread, then a system-wide fence so that a host
// reading mapped memory sees it in order with what the stream did before.
__global__ void cwk_write_u32(uint32_t *dst, uint32_t value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *(volatile uint32_t *)dst = value;
        __threadfence_system();
    }
}

// *dst = the GPU's global timer (nanoseconds).
__global__ void cwk_timestamp(uint64_t *dst) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        *dst = t;
    }
}

// Sets a graph condition to (*value != 0).
__global__ void cwk_set_cond(cudaGraphConditionalHandle handle, const uint32_t *value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(handle, *value != 0 ? 1u : 0u);
}

}  // extern "C"
