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

#include "kernels/gq_kernels.h"

#include "kernels/gemm_avx2.h"

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

/* Chunk k of a group of levels q (scale and zero term dz = [d, d z]) against
 * its activation block: acc += (d * dy) * chunk's integer sums, and the
 * zero term d z * s added to lane 1 of zs. */
static inline __attribute__((always_inline)) __m256 gq_step(int bits, const uint8_t *q,
                                                            const block_q8_1 *y, int64_t k,
                                                            __m128 dz, __m128 *zs, __m256 acc) {
    const __m128 dd = _mm_mul_ps(dz, qa_f16x4(&y[k]));
    *zs = _mm_add_ps(*zs, dd);
    return _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), chunk_dot(bits, q + k * bits * 4, &y[k]), acc);
}

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
            acc0 = gq_step(bits, q, y, c, dz, &zs, acc0);
            acc1 = gq_step(bits, q, y, c + 1, dz, &zs, acc1);
        }
        if (c < cpg) acc0 = gq_step(bits, q, y, c, dz, &zs, acc0);
    }
    return qa_hsum_ps(_mm256_add_ps(acc0, acc1)) - _mm_cvtss_f32(_mm_shuffle_ps(zs, zs, 1));
}

/* ---- gemm tiles (wtype_gemm_fn): 4 weight rows by up to 4 activation rows ----
 *
 * Every output is computed as: per chunk of 32, the exact integer sum I of
 * (level - o) * activation quant, then acc = fma(float(I), d * dy, acc) and
 * acc = fnmadd(d * (z - o), s, acc), chunk after chunk from acc = 0, in the
 * lane of its weight row; so an output's bits do not depend on the tile's
 * shape or its place in it (they may differ from vec_dot's in the last bits).
 * Per chunk each weight row is unpacked once for all activation rows, and the
 * integer sums of the 4 rows with one activation row are transposed into one
 * vector [r0 r1 r2 r3] (transpose_sum4_*, as gemm_legacy_avx2.c does for
 * Q4_0), so scaling costs two instructions per 4 outputs. Rows beyond nr repeat row 0 and are
 * computed but not stored. */

static inline __attribute__((always_inline)) void gq_tile(const int bits, const int NC, int64_t g, int n, int nr,
                                                         float *restrict s, size_t ldc, const uint8_t *x,
                                                         size_t bx, const uint8_t *y, size_t by) {
    const int64_t cpg = g / GQ_CHUNK, n_groups = n / g;
    const size_t bb = gq_block_bytes(bits, g);
    const int o = bits == 8 ? 128 : 0;
    const uint8_t *row[GQ_TILE_ROWS];
    for (int r = 0; r < GQ_TILE_ROWS; r++) row[r] = x + (size_t)(r < nr ? r : 0) * bx;
    __m128 acc[GQ_TILE_COLS];
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    for (int64_t b = 0; b < n_groups; b++) {
        const uint8_t *blk[GQ_TILE_ROWS];
        int z[GQ_TILE_ROWS];
        for (int r = 0; r < GQ_TILE_ROWS; r++) {
            blk[r] = row[r] + (size_t)b * bb;
            z[r] = (int)blk[r][2] - o;
        }
        const __m128 d = rows4_f16(blk, 0);
        const __m128 dz = _mm_mul_ps(d, _mm_cvtepi32_ps(_mm_setr_epi32(z[0], z[1], z[2], z[3])));
        for (int64_t k = 0; k < cpg; k++) {
            __m256i q[GQ_TILE_ROWS], mag[GQ_TILE_ROWS];
            for (int r = 0; r < GQ_TILE_ROWS; r++) {
                q[r] = unpack_chunk(bits, blk[r] + GQ_BLOCK_HEADER + k * bits * 4);
                if (bits == 8) {
                    q[r] = _mm256_xor_si256(q[r], _mm256_set1_epi8((char)0x80));
                    mag[r] = _mm256_abs_epi8(q[r]);
                }
            }
            for (int c = 0; c < NC; c++) {
                const block_q8_1 *yb = (const block_q8_1 *)(y + (size_t)c * by) + b * cpg + k;
                const __m256i yv = _mm256_loadu_si256((const __m256i *)yb->qs);
                __m256i p[GQ_TILE_ROWS], v;
                if (bits == 8) {
                    for (int r = 0; r < GQ_TILE_ROWS; r++)
                        p[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(mag[r], _mm256_sign_epi8(yv, q[r])),
                                                 _mm256_set1_epi16(1));
                    v = transpose_sum4_i32(p);
                } else {
                    for (int r = 0; r < GQ_TILE_ROWS; r++) p[r] = _mm256_maddubs_epi16(q[r], yv);
                    v = transpose_sum4_i16(p);
                }
                const __m128i full = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                acc[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(full), _mm_mul_ps(d, bcast_f16(&yb->d)), acc[c]);
                acc[c] = _mm_fnmadd_ps(dz, bcast_f16(&yb->s), acc[c]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        float sum[GQ_TILE_ROWS];
        _mm_storeu_ps(sum, acc[c]);
        for (int r = 0; r < nr; r++) s[(size_t)c * ldc + r] = sum[r];
    }
}

/* gq_tile with NC = nc, a constant in each instance. */
static inline __attribute__((always_inline)) void
gq_tile_any(const int bits, int64_t g, int n, int nr, int nc, float *restrict s, size_t ldc,
            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    switch (nc) {
    case 1:
        gq_tile(bits, 1, g, n, nr, s, ldc, x, bx, y, by);
        break;
    case 2:
        gq_tile(bits, 2, g, n, nr, s, ldc, x, bx, y, by);
        break;
    case 3:
        gq_tile(bits, 3, g, n, nr, s, ldc, x, bx, y, by);
        break;
    default:
        gq_tile(bits, 4, g, n, nr, s, ldc, x, bx, y, by);
        break;
    }
}
_Static_assert(GQ_TILE_ROWS == 4 && GQ_TILE_COLS == 4,
               "4 rows per vector of results; gq_tile_any instantiates 1 to 4 columns");

/* ---- per-type entry points ---- */

/* 2 bits */

void vec_dot_gq2_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(2, 32, n, x, y);
}

void gemm_gq2_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(2, 32, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq2_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(2, 64, n, x, y);
}

void gemm_gq2_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(2, 64, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq2_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y) {
    *s = dot(2, 128, n, x, y);
}

void gemm_gq2_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(2, 128, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq2_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(2, n, n, x, y);
}

void gemm_gq2_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(2, n, n, nr, nc, s, ldc, x, bx, y, by);
}

/* 3 bits */

void vec_dot_gq3_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(3, 32, n, x, y);
}

void gemm_gq3_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(3, 32, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq3_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(3, 64, n, x, y);
}

void gemm_gq3_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(3, 64, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq3_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y) {
    *s = dot(3, 128, n, x, y);
}

void gemm_gq3_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(3, 128, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq3_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(3, n, n, x, y);
}

void gemm_gq3_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(3, n, n, nr, nc, s, ldc, x, bx, y, by);
}

/* 4 bits */

void vec_dot_gq4_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(4, 32, n, x, y);
}

void gemm_gq4_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(4, 32, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq4_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(4, 64, n, x, y);
}

void gemm_gq4_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(4, 64, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq4_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y) {
    *s = dot(4, 128, n, x, y);
}

void gemm_gq4_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(4, 128, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq4_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(4, n, n, x, y);
}

void gemm_gq4_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(4, n, n, nr, nc, s, ldc, x, bx, y, by);
}

/* 8 bits */

void vec_dot_gq8_g32_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(8, 32, n, x, y);
}

void gemm_gq8_g32_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(8, 32, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq8_g64_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(8, 64, n, x, y);
}

void gemm_gq8_g64_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(8, 64, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq8_g128_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                                const void *restrict y) {
    *s = dot(8, 128, n, x, y);
}

void gemm_gq8_g128_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                             const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(8, 128, n, nr, nc, s, ldc, x, bx, y, by);
}

void vec_dot_gq8_row_q8_1_avx2(int n, float *restrict s, const void *restrict x,
                               const void *restrict y) {
    *s = dot(8, n, n, x, y);
}

void gemm_gq8_row_q8_1_avx2(int n, int nr, int nc, float *restrict s, size_t ldc,
                            const void *restrict x, size_t bx, const void *restrict y, size_t by) {
    gq_tile_any(8, n, n, nr, nc, s, ldc, x, bx, y, by);
}
