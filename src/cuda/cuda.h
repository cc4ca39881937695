/* cuda.h: what the CUDA build adds (cmake -DMINFER_CUDA=ON): device discovery for now; the CUDA
 * backend's kernels build on it. Without a CUDA build these report no devices. */
#ifndef MF_CUDA_H
#define MF_CUDA_H

#include "minfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mf_cuda_device, mf_cuda_built, mf_cuda_device_count, mf_cuda_device_info: see minfer.h. */

#ifdef __cplusplus
}
#endif
#endif /* MF_CUDA_H */
