/* cuda.h: what the CUDA build adds (cmake -DMINFER_CUDA=ON): device discovery for now; the CUDA
 * backend's kernels build on it. Without a CUDA build these report no devices. */
#ifndef MF_CUDA_H
#define MF_CUDA_H

#include "minfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_cuda_device {
    char name[256];
    int major, minor;      /* compute capability */
    size_t total_mem;      /* bytes */
    int multiprocessors;
} mf_cuda_device;

/* Whether this build contains the CUDA backend. */
bool mf_cuda_built(void);
/* Number of usable CUDA devices: 0 when none, when the driver is missing, or in a CPU-only build
 * (the reason is in mf_last_error()). */
int mf_cuda_device_count(void);
/* Properties of device i (0 <= i < mf_cuda_device_count()). */
mf_status mf_cuda_device_info(int i, mf_cuda_device *out);

#ifdef __cplusplus
}
#endif
#endif /* MF_CUDA_H */
