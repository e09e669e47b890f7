/* AVX2 paged attention, a tile of query rows at a time (attention.h). For each
 * K/V block the tile touches:
 *   1. scores: 2 rows x 4 keys per step, one 8-lane accumulator per pair,
 *      so each K vector is converted once for two rows and each Q vector
 *      loaded once for four keys;
 *   2. per row: scale, mask to the row's own positions, block max, one
 *      rescale factor, p = exp(s - m) eight keys at a time;
 *   3. P.V: 2 rows x 32 value dims per step, the accumulators in registers
 *      across the block's keys, each V vector converted once for two rows.
 * A row's arithmetic (its dot products, hsum tree, exp, sums, the order of
 * its P.V updates) is the same whatever rows share its tile, so one row
 * (attn_paged_avx2, decode) gets the bits it gets inside a prefill tile.
 * When the tile asks for key mass, a last sweep over the blocks computes the
 * scores again and adds each row's final probabilities (mass_sweep). */
#include "kernels/attention.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Values i .. i+7 of a row (kv_row.h) as floats, the bits of kv_row_value:
 * an 8-bit code is widened to an exact float, then times the row's scale. */
static ALWAYS_INLINE __m256 load8(const uint8_t *row, kv_dtype dt, int i) {
    if (dt == KV_F32) return _mm256_loadu_ps((const float *)row + i);
    if (dt == KV_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)i)));
    if (dt == KV_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)i))), 16));
    const __m128i b = _mm_loadl_epi64((const __m128i *)(row + KV_ROW_SCALE_BYTES + i));
    const __m256 scale = _mm256_set1_ps(kv_row_scale(row));
    __m256 x;
    if (dt == KV_INT8) {
        x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    } else if (dt == KV_FP8_E5M2) {
        x = _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8)); /* e5m2 is an f16's top byte */
    } else {
        /* e4m3 -> the f16 with the same sign, exponent and mantissa bits
         * (bias 15 instead of 7, subnormals included): the sign-extended code
         * shifted left 7 has sign, exponent and mantissa in place and a copy
         * of the sign in bit 14, cleared. Times 2^8 for the bias, exact.
         * S.1111.111 (NaN) is not special-cased: only rows holding a NaN
         * contain it, and their scale is NaN (kv_row.c). */
        const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7), _mm_set1_epi16((short)0xBF80));
        x = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    }
    return _mm256_mul_ps(x, scale);
}

static ALWAYS_INLINE float load1(const uint8_t *row, kv_dtype dt, int i) { return kv_row_value(dt, row, i); }

/* (v0 + v1 + v2 + v3) + (v4 + v5 + v6 + v7), each half a pair of pairs: the
 * tree hsum8 computes for eight vectors at once, so a dot's bits do not
 * depend on which step computed it. */
static ALWAYS_INLINE float hsum1(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* Lane i: hsum1(a[i]). */
static ALWAYS_INLINE __m256 hsum8(const __m256 a[8]) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 g = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(h, g, 0x20), _mm256_permute2f128_ps(h, g, 0x31));
}

/* exp(x) for 8 lanes, Cephes' expf: x = n ln2 + r, a degree-6 polynomial in r,
 * times 2^n; within 2 ulp of expf. Lanes below -87 (masked keys are -inf)
 * give 0. */
static ALWAYS_INLINE __m256 exp8(__m256 x) {
    const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.3762626647949f));
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), live);
}

/* What the steps of one tile share. */
typedef struct {
    int n_rows, dk, dv, bs;
    const float *q[ATTN_TILE_ROWS];
    float *out[ATTN_TILE_ROWS];
    int lo[ATTN_TILE_ROWS], hi[ATTN_TILE_ROWS];
    float m[ATTN_TILE_ROWS], l[ATTN_TILE_ROWS];
    size_t vstride; /* bytes from one V row to the next (paged_v_row_bytes) */
    float softcap;  /* attn_tile's */
} tile_rows;

/* Raw dots of rows r0 .. r0+NR-1 with keys k0 .. k0+NK-1 of a block into
 * s[row][key]; NR <= 2, NK <= 4, constants after inlining. */
static ALWAYS_INLINE void dots(int NR, int NK, kv_dtype dt, const tile_rows *tr, int r0, const uint8_t *kblk,
                               int k0, float s[][ATTN_MAX_BLOCK]) {
    const int dk = tr->dk;
    const size_t kstride = kv_row_bytes(dt, dk);
    __m256 acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= dk; d += 8) {
        __m256 q[2];
        for (int r = 0; r < NR; r++) q[r] = _mm256_loadu_ps(tr->q[r0 + r] + d);
        for (int k = 0; k < NK; k++) {
            const __m256 kv = load8(kblk + (size_t)(k0 + k) * kstride, dt, d);
            for (int r = 0; r < NR; r++) acc[r * 4 + k] = _mm256_fmadd_ps(q[r], kv, acc[r * 4 + k]);
        }
    }
    float sum[8];
    if (NR == 2 && NK == 4) _mm256_storeu_ps(sum, hsum8(acc));
    else
        for (int r = 0; r < NR; r++)
            for (int k = 0; k < NK; k++) sum[r * 4 + k] = hsum1(acc[r * 4 + k]);
    for (int r = 0; r < NR; r++)
        for (int k = 0; k < NK; k++) {
            float x = sum[r * 4 + k];
            const uint8_t *krow = kblk + (size_t)(k0 + k) * kstride;
            for (int e = d; e < dk; e++) x += tr->q[r0 + r][e] * load1(krow, dt, e);
            s[r0 + r][k0 + k] = x;
        }
}

static ALWAYS_INLINE void dots_rows(int NR, kv_dtype dt, const tile_rows *tr, int r0, const uint8_t *kblk, int t0,
                                    int t1, float s[][ATTN_MAX_BLOCK]) {
    int k = t0;
    for (; k + 4 <= t1 + 1; k += 4) dots(NR, 4, dt, tr, r0, kblk, k, s);
    switch (t1 + 1 - k) {
    case 3: dots(NR, 3, dt, tr, r0, kblk, k, s); break;
    case 2: dots(NR, 2, dt, tr, r0, kblk, k, s); break;
    case 1: dots(NR, 1, dt, tr, r0, kblk, k, s); break;
    default: break;
    }
}

/* out[d .. d + 8*ND) of rows[0 .. NR) = c * out + sum over keys t0..t1 of
 * p[t] * V[t]; NR <= 2, ND <= 4. */
static ALWAYS_INLINE void pv(int NR, int ND, kv_dtype dt, const tile_rows *tr, const int *rows, const float *c,
                             const uint8_t *vblk, int t0, int t1, float p[][ATTN_MAX_BLOCK], int d) {
    const size_t vstride = tr->vstride;
    __m256 acc[2][4];
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < ND; j++)
            acc[r][j] = _mm256_mul_ps(_mm256_set1_ps(c[r]), _mm256_loadu_ps(tr->out[rows[r]] + d + 8 * j));
    for (int t = t0; t <= t1; t++) {
        __m256 v[4];
        for (int j = 0; j < ND; j++) v[j] = load8(vblk + (size_t)t * vstride, dt, d + 8 * j);
        for (int r = 0; r < NR; r++) {
            const __m256 pr = _mm256_broadcast_ss(&p[rows[r]][t]);
            for (int j = 0; j < ND; j++) acc[r][j] = _mm256_fmadd_ps(pr, v[j], acc[r][j]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < ND; j++) _mm256_storeu_ps(tr->out[rows[r]] + d + 8 * j, acc[r][j]);
}

static ALWAYS_INLINE void pv_rows(int NR, kv_dtype dt, const tile_rows *tr, const int *rows, const float *c,
                                  const uint8_t *vblk, int t0, int t1, float p[][ATTN_MAX_BLOCK]) {
    const int dv = tr->dv;
    const size_t vstride = tr->vstride;
    int d = 0;
    for (; d + 32 <= dv; d += 32) pv(NR, 4, dt, tr, rows, c, vblk, t0, t1, p, d);
    for (; d + 8 <= dv; d += 8) pv(NR, 1, dt, tr, rows, c, vblk, t0, t1, p, d);
    for (; d < dv; d++)
        for (int r = 0; r < NR; r++) {
            float a = c[r] * tr->out[rows[r]][d];
            for (int t = t0; t <= t1; t++) a += p[rows[r]][t] * load1(vblk + (size_t)t * vstride, dt, d);
            tr->out[rows[r]][d] = a;
        }
}

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

/* The keys row r sees in block b, as offsets a..e in the block: a > e when
 * none. */
static void row_span(const tile_rows *tr, int r, int b, int *a, int *e) {
    const int bs = tr->bs;
    *a = max_int(tr->lo[r], b * bs) - b * bs;
    *e = min_int(tr->hi[r], b * bs + bs - 1) - b * bs;
}

/* s[k] = scale * s[k] (soft-capped: softcap * tanh(scale * s[k] / softcap))
 * for the keys a..e, -inf for the others, over the whole 8-key chunks
 * c0..c1; returns the largest. */
static float scale_and_mask(float *s, int a, int e, int c0, int c1, float scale, float softcap) {
    if (softcap > 0) { /* Gemma 2 only: scalar tanhf, as the reference computes it */
        for (int k = a; k <= e; k++) s[k] = softcap * tanhf(s[k] * scale / softcap);
        scale = 1.0f;
    }
    const __m256 sc = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf;
    for (int k = c0; k < c1; k += 8) {
        const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(a), idx),
                                               _mm256_andnot_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(e)),
                                                                   _mm256_set1_epi32(-1)));
        const __m256 x = _mm256_blendv_ps(ninf, _mm256_mul_ps(sc, _mm256_loadu_ps(s + k)), _mm256_castsi256_ps(in));
        _mm256_storeu_ps(s + k, x);
        mx = _mm256_max_ps(mx, x);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

/* Step 2 for row r over the block's keys t0..t1 (block b): turns its raw dots
 * into p, updates m and l, and returns the factor for its accumulator, or a
 * negative number when the row sees none of these keys. */
static float softmax_row(tile_rows *tr, int r, int b, int t0, int t1, float scale, float *s) {
    int a, e;
    row_span(tr, r, b, &a, &e);
    if (a > e) return -1;
    const int c0 = t0 & ~7, c1 = (t1 + 8) & ~7; /* whole 8-key chunks, within s's ATTN_MAX_BLOCK */
    const float mb = scale_and_mask(s, a, e, c0, c1, scale, tr->softcap);
    float c = 1;
    if (mb > tr->m[r]) {
        c = expf(tr->m[r] - mb);
        tr->m[r] = mb;
    }
    const __m256 mv = _mm256_set1_ps(tr->m[r]);
    __m256 sum = _mm256_setzero_ps();
    for (int k = c0; k < c1; k += 8) {
        const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + k), mv));
        _mm256_storeu_ps(s + k, p);
        sum = _mm256_add_ps(sum, p);
    }
    tr->l[r] = tr->l[r] * c + hsum1(sum);
    return c;
}

/* The mass sweep (attention.h): with every row's m and l final, block by
 * block the dots again, then per row p = exp(s - m) / l in ATTN_MASS_ONE
 * units, rounded to integers and summed over the rows per key (exactly: at
 * most 32 rows of at most 2^24), then one atomic add per key of the block. */
static ALWAYS_INLINE void mass_sweep(kv_dtype dt, const paged_kv *kv, const int32_t *block_table, int kv_head,
                                     const tile_rows *tr, int jlo, int jhi, float scale, float s[][ATTN_MAX_BLOCK],
                                     int64_t *key_mass) {
    const int bs = tr->bs;
    float w[ATTN_TILE_ROWS];
    for (int r = 0; r < tr->n_rows; r++) w[r] = (float)ATTN_MASS_ONE / tr->l[r];
    _Alignas(32) int32_t col[ATTN_MAX_BLOCK];
    for (int b = jlo / bs; b <= jhi / bs; b++) {
        const int t0 = max_int(jlo, b * bs) - b * bs, t1 = min_int(jhi, b * bs + bs - 1) - b * bs;
        const int c0 = t0 & ~7, c1 = (t1 + 8) & ~7;
        const uint8_t *kblk = kv->k + (size_t)block_table[b] * kv->k_block_stride +
                              (size_t)kv_head * bs * kv_row_bytes(dt, tr->dk);
        int r = 0;
        for (; r + 2 <= tr->n_rows; r += 2) dots_rows(2, dt, tr, r, kblk, t0, t1, s);
        if (r < tr->n_rows) dots_rows(1, dt, tr, r, kblk, t0, t1, s);
        for (int k = c0; k < c1; k += 8) _mm256_store_si256((__m256i *)(col + k), _mm256_setzero_si256());
        for (r = 0; r < tr->n_rows; r++) {
            int a, e;
            row_span(tr, r, b, &a, &e);
            if (a > e) continue;
            scale_and_mask(s[r], a, e, c0, c1, scale, tr->softcap);
            const __m256 mv = _mm256_set1_ps(tr->m[r]), wv = _mm256_set1_ps(w[r]);
            for (int k = c0; k < c1; k += 8) {
                const __m256 p = _mm256_mul_ps(exp8(_mm256_sub_ps(_mm256_loadu_ps(s[r] + k), mv)), wv);
                const __m256i sum =
                    _mm256_add_epi32(_mm256_load_si256((const __m256i *)(col + k)), _mm256_cvtps_epi32(p));
                _mm256_store_si256((__m256i *)(col + k), sum);
            }
        }
        for (int k = t0; k <= t1; k++)
            if (col[k]) __atomic_fetch_add(&key_mass[b * bs + k], (int64_t)col[k], __ATOMIC_RELAXED);
    }
}

static ALWAYS_INLINE void tile_body(kv_dtype dt, const paged_kv *kv, const int32_t *block_table, int kv_head,
                                    const attn_tile *t, float scale) {
    tile_rows tr = {.n_rows = t->n_tok * t->n_head, .dk = kv->head_dim_k, .dv = kv->head_dim_v,
                    .bs = kv->block_size, .softcap = t->softcap, .vstride = paged_v_row_bytes(kv)};
    const int bs = tr.bs;
    int jlo = t->lo[0], jhi = t->hi[0];
    for (int r = 0; r < tr.n_rows; r++) {
        const int i = r / t->n_head, h = r % t->n_head;
        tr.q[r] = t->q + i * t->q_stride + (size_t)h * tr.dk;
        tr.out[r] = t->out + i * t->out_stride + (size_t)h * tr.dv;
        tr.lo[r] = t->lo[i], tr.hi[r] = t->hi[i];
        tr.m[r] = t->sinks ? t->sinks[h] : -INFINITY, tr.l[r] = t->sinks ? 1 : 0; /* the sink: a key seen first */
        for (int d = 0; d < tr.dv; d++) tr.out[r][d] = 0;
        jlo = min_int(jlo, tr.lo[r]), jhi = max_int(jhi, tr.hi[r]);
    }
    _Alignas(32) float s[ATTN_TILE_ROWS][ATTN_MAX_BLOCK];
    int32_t path[ATTN_TREE_MAX];
    if (t->tree) attn_tree_path(t->tree[0], t->tree_base, path);
    for (int b = jlo / bs; b <= jhi / bs; b++) {
        const int t0 = max_int(jlo, b * bs) - b * bs, t1 = min_int(jhi, b * bs + bs - 1) - b * bs;
        const size_t row0 = (size_t)kv_head * bs;
        const uint8_t *kblk = kv->k + (size_t)block_table[b] * kv->k_block_stride + row0 * kv_row_bytes(dt, tr.dk);
        const uint8_t *vblk = kv->v + (size_t)block_table[b] * kv->v_block_stride + row0 * tr.vstride;
        if (t->tree && b * bs + t1 > t->tree_base) { /* a block of the token's path: its keys gathered */
            attn_tree_gather(kv, block_table, kv_head, b, t0, t1, t->tree_base, path, t->tree_rows);
            kblk = t->tree_rows, vblk = t->tree_rows + (size_t)bs * kv_row_bytes(dt, tr.dk);
        }
        int r = 0;
        for (; r + 2 <= tr.n_rows; r += 2) dots_rows(2, dt, &tr, r, kblk, t0, t1, s);
        if (r < tr.n_rows) dots_rows(1, dt, &tr, r, kblk, t0, t1, s);
        /* The rows that see some key of this block, and their factors. */
        int live[ATTN_TILE_ROWS], n_live = 0;
        float c[ATTN_TILE_ROWS];
        for (r = 0; r < tr.n_rows; r++) {
            const float cr = softmax_row(&tr, r, b, t0, t1, scale, s[r]);
            if (cr >= 0) c[n_live] = cr, live[n_live++] = r;
        }
        int i = 0;
        for (; i + 2 <= n_live; i += 2) pv_rows(2, dt, &tr, live + i, c + i, vblk, t0, t1, s);
        if (i < n_live) pv_rows(1, dt, &tr, live + i, c + i, vblk, t0, t1, s);
    }
    for (int r = 0; r < tr.n_rows; r++) {
        const __m256 inv = _mm256_set1_ps(1.0f / tr.l[r]);
        float *out = tr.out[r];
        int d = 0;
        for (; d + 8 <= tr.dv; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(inv, _mm256_loadu_ps(out + d)));
        for (; d < tr.dv; d++) out[d] *= 1.0f / tr.l[r];
    }
    if (t->key_mass && !t->tree) mass_sweep(dt, kv, block_table, kv_head, &tr, jlo, jhi, scale, s, t->key_mass);
}

void attn_tile_avx2(const paged_kv *kv, const int32_t *block_table, int kv_head, const attn_tile *t,
                    float scale) {
    /* One body per dtype, each with its loads inlined. */
    switch (kv->dtype) {
    case KV_F32: tile_body(KV_F32, kv, block_table, kv_head, t, scale); break;
    case KV_F16: tile_body(KV_F16, kv, block_table, kv_head, t, scale); break;
    case KV_BF16: tile_body(KV_BF16, kv, block_table, kv_head, t, scale); break;
    case KV_FP8_E4M3: tile_body(KV_FP8_E4M3, kv, block_table, kv_head, t, scale); break;
    case KV_FP8_E5M2: tile_body(KV_FP8_E5M2, kv, block_table, kv_head, t, scale); break;
    case KV_INT8: tile_body(KV_INT8, kv, block_table, kv_head, t, scale); break;
    default: break;
    }
}

void attn_paged_avx2(const paged_kv *kv, const int32_t *block_table, int kv_head, const float *q, int lo,
                     int hi, float scale, float *out) {
    const int32_t lo1 = lo, hi1 = hi;
    const attn_tile t = {.q = q, .out = out, .lo = &lo1, .hi = &hi1, .n_tok = 1, .n_head = 1};
    attn_tile_avx2(kv, block_table, kv_head, &t, scale);
}
