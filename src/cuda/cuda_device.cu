/* cuda_device.cu: CUDA device discovery. It also compiles the shared quant block layouts with nvcc,
 * so their size checks hold for device code too. */
#include "cuda/cuda.h"

extern "C" {
#include "quant/quant.h"
mf_status mf_fail(mf_status s, const char *fmt, ...);
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

/* The device sees the same block sizes as the host (quant.h's static asserts run under nvcc too). */
static_assert(sizeof(mf_block_q4_K) == 144 && sizeof(mf_block_q6_K) == 210, "quant layouts under nvcc");

extern "C" bool mf_cuda_built(void) { return true; }

extern "C" int mf_cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        mf_fail(MF_ERR_UNSUPPORTED, "no CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    return n;
}

extern "C" mf_status mf_cuda_device_info(int i, mf_cuda_device *out) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) return mf_fail(MF_ERR_ARG, "CUDA device %d: %s", i, cudaGetErrorString(e));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->major = p.major;
    out->minor = p.minor;
    out->total_mem = p.totalGlobalMem;
    out->multiprocessors = p.multiProcessorCount;
    return MF_OK;
}
