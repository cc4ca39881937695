/* qmodel.h: quantizing a whole GGUF model file (the API is public: include/minfer/quantize.h). */
#ifndef MF_QMODEL_H
#define MF_QMODEL_H

#include "gguf/gguf.h"
#include "minfer/quantize.h"
#include "quant/quant.h"

#endif /* MF_QMODEL_H */
