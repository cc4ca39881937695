/* stop.h: stop strings (their API is public: include/minfer/sample.h). */
#ifndef MF_STOP_H
#define MF_STOP_H

#include "minfer.h"

#endif /* MF_STOP_H */
