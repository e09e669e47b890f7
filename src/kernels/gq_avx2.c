/* AVX2 dot products of the GQ formats (qgroup.h) with Q8_1 activations.
 *
 * Each 32-element chunk unpacks into one register of levels in element order
 * (that is what the chunk layout is for) and meets its activation block in
 * one maddubs: levels of 2-4 bits are small unsigned bytes; 8-bit levels are
 * made signed by flipping their top bit (q - 128), and the zero point moves
 * by 128 to match. The zero point term d * z * sum(s) rides in lane 1 of the
 * per-chunk scale vector, as the min term of Q4_1 does in quants_legacy_avx2.c:
 * lane 0 of [d, d z] * [dy, s] is the chunk's scale, lane 1 its zero term. */
#include "kernels/gq.h"

#include "kernels/quants_avx2.h"
#include "kernels/quants_blocks.h"

/* The 32 levels of a chunk as unsigned bytes (8 bits: as stored). */
static inline __attribute__((always_inline)) __m256i unpack_chunk(int bits, const uint8_t *p) {
    if (bits == 4) return qa_nibbles32(p);
    if (bits == 8) return _mm256_loadu_si256((const __m256i *)p);
    uint64_t v;
    memcpy(&v, p, sizeof v);
    /* 64-bit lane k shifted by 2k: byte i of lane k is q_(8k+i) in its low 2 bits. */
    __m256i q = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x((long long)v), _mm256_setr_epi64x(0, 2, 4, 6)),
                                 _mm256_set1_epi8(3));
    if (bits == 3) q = _mm256_or_si256(q, _mm256_and_si256(qa_bits32(p + 8), _mm256_set1_epi8(4)));
    return q;
}

/* Integer dot of one chunk with one activation block, as 8 floats. */
static inline __attribute__((always_inline)) __m256 chunk_dot(int bits, const uint8_t *p, const block_q8_1 *y) {
    const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    const __m256i q = unpack_chunk(bits, p);
    const __m256i sum = bits == 8 ? qa_dot_i8i8(_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)), qy)
                                  : qa_dot_u8i8(q, qy);
    return _mm256_cvtepi32_ps(sum);
}

#define GQ_STEP(acc, k)                                                                             \
    do {                                                                                            \
        const __m128 dd = _mm_mul_ps(dz, qa_f16x4(&y[k]));                                          \
        zs = _mm_add_ps(zs, dd);                                                                    \
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), chunk_dot(bits, q + (k) * bits * 4, &y[k]), acc); \
    } while (0)

static inline __attribute__((always_inline)) float dot(int bits, int64_t g, int n, const uint8_t *x,
                                                      const block_q8_1 *y) {
    const int64_t cpg = g / GQ_CHUNK;
    const size_t bb = gq_block_bytes(bits, g);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    __m128 zs = _mm_setzero_ps();
    for (int64_t b = 0; b < n / g; b++, x += bb, y += cpg) {
        f16_t d16;
        memcpy(&d16, x, sizeof d16);
        const float d = qa_f16(d16);
        const int z = bits == 8 ? (int)x[2] - 128 : (int)x[2];
        const __m128 dz = _mm_setr_ps(d, d * (float)z, 0.0f, 0.0f);
        const uint8_t *q = x + GQ_BLOCK_HEADER;
        int64_t c = 0;
        for (; c + 2 <= cpg; c += 2) {
            GQ_STEP(acc0, c);
            GQ_STEP(acc1, c + 1);
        }
        if (c < cpg) GQ_STEP(acc0, c);
    }
    return qa_hsum_ps(_mm256_add_ps(acc0, acc1)) - _mm_cvtss_f32(_mm_shuffle_ps(zs, zs, 1));
}

#define GQ_DOT(bits, gc)                                                                            \
    static void vec_dot_##bits##_##gc(int n, float *restrict s, const void *restrict x,             \
                                      const void *restrict y) {                                     \
        *s = dot(bits, (gc) == GQ_GROUP_ROW ? (int64_t)n : (int64_t)32 << (gc), n, x, y);           \
    }
#define GQ_DOTS(bits) GQ_DOT(bits, 0) GQ_DOT(bits, 1) GQ_DOT(bits, 2) GQ_DOT(bits, 3)
GQ_DOTS(2)
GQ_DOTS(3)
GQ_DOTS(4)
GQ_DOTS(8)

#define GQ_ENTRIES(bits) vec_dot_##bits##_0, vec_dot_##bits##_1, vec_dot_##bits##_2, vec_dot_##bits##_3
const wtype_vec_dot_fn gq_vec_dot_avx2[WT_GQ_COUNT] = {GQ_ENTRIES(2), GQ_ENTRIES(3), GQ_ENTRIES(4),
                                                       GQ_ENTRIES(8)};
