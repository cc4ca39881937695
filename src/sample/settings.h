/* settings.h: sample settings (the API is public: include/minfer/sample.h); this header adds
 * applying a parsed jansson object, for the library's own use. */
#ifndef MF_SAMPLE_SETTINGS_H
#define MF_SAMPLE_SETTINGS_H

#include "minfer.h"

#include <jansson.h>

/* mf_sample_settings_from_json for an object already parsed (the same fields and errors). */
mf_status mf_sample_settings_apply_json(mf_sample_settings *s, const json_t *req);

#endif /* MF_SAMPLE_SETTINGS_H */
