/* cuda_none.c: the CUDA entry points of a CPU-only build (no devices). */
#include "cuda/cuda.h"
#include "core/core.h"

#ifndef MINFER_CUDA
bool mf_cuda_built(void) { return false; }

int mf_cuda_device_count(void) {
    mf_fail(MF_ERR_UNSUPPORTED, "this minfer was built without CUDA (cmake -DMINFER_CUDA=ON)");
    return 0;
}

mf_status mf_cuda_device_info(int i, mf_cuda_device *out) {
    (void)out;
    return mf_fail(MF_ERR_UNSUPPORTED, "CUDA device %d: this minfer was built without CUDA", i);
}
#endif
