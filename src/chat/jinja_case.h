/* jinja_case.h: the Unicode tables (jinja_case_data.c, generated) behind the Python string methods
 * templates call: simple and multi-character case mappings and the cased/alpha/numeric/printable
 * classes.
 * Pair tables are sorted by code point: {code point, mapping} or {first, last} of a range. */
#ifndef MF_JINJA_CASE_H
#define MF_JINJA_CASE_H

#include "chat/jinja_names.h"

#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t cp; const char *utf8; } ju_special; /* a mapping to several code points */

typedef struct {
    const uint32_t (*upper)[2]; size_t n_upper;
    const uint32_t (*lower)[2]; size_t n_lower;
    const uint32_t (*title)[2]; size_t n_title; /* only where title case differs from upper case */
    const ju_special *upper_sp; size_t n_upper_sp;
    const ju_special *lower_sp; size_t n_lower_sp;
    const ju_special *title_sp; size_t n_title_sp;
    const uint32_t (*cased)[2]; size_t n_cased;
    const uint32_t (*alpha)[2]; size_t n_alpha;
    const uint32_t (*numeric)[2]; size_t n_numeric;
    const uint32_t (*ignorable)[2]; size_t n_ignorable; /* case-ignorable: skipped by the final-sigma rule */
    const uint32_t (*printable)[2]; size_t n_printable; /* str.isprintable: what repr() shows as is */
} ju_case_tables;

extern const ju_case_tables ju_case;

#endif /* MF_JINJA_CASE_H */
