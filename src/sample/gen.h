/* gen.h: the generation loop (its API is public: include/minfer/sample.h). */
#ifndef MF_GEN_H
#define MF_GEN_H

#include "minfer.h"

#endif /* MF_GEN_H */
