/* sampler.h: the sampler chain (its API is public: include/minfer/sample.h). */
#ifndef MF_SAMPLER_H
#define MF_SAMPLER_H

#include "minfer.h"

#endif /* MF_SAMPLER_H */
