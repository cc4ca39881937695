/* kquant_common.h: K-quant helpers shared by every instruction set's kernels (plain C). */
#ifndef MF_KQUANT_COMMON_H
#define MF_KQUANT_COMMON_H

#include <stdint.h>
#include <string.h>

/* The 12 packed scale bytes b of a Q4_K/Q5_K block -> out[0..7] = 6-bit scales sc_0..7, out[8..15] =
 * 6-bit mins m_0..7 (the same values as mf_get_scale_min_k4, four bytes at a time, little-endian):
 *   j < 4:  sc_j = b[j] & 63,                        m_j = b[j+4] & 63
 *   j >= 4: sc_j = (b[j+4] & 15) | (b[j-4] >> 6) << 4,  m_j = (b[j+4] >> 4) | (b[j] >> 6) << 4 */
static inline void mf_k4_unpack_scales(const uint8_t b[12], uint8_t out[16]) {
    uint32_t u[3], r[4];
    memcpy(u, b, 12);
    r[0] = u[0] & 0x3f3f3f3fu;
    r[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;
    r[2] = u[1] & 0x3f3f3f3fu;
    r[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4;
    memcpy(out, r, 16);
}

#endif /* MF_KQUANT_COMMON_H */
