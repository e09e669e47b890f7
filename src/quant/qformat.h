/* The storage format `cllm quantize` writes a linear layer in, and the grid
 * every quantizer (RTN, GPTQ, AWQ) rounds onto: b-bit levels q in
 * [qmin, 2^b - 1] per group of g input columns, dequantized as
 *     w = scale * q + offset
 * with the group's scale and offset exactly as the file stores them, so a
 * quantizer that propagates rounding errors (GPTQ) sees the values the model
 * will compute with.
 *
 * Standard GGUF types are used where they hold the grid exactly, so that
 * llama.cpp can read the file: 8 bits, groups of 32, symmetric -> Q8_0;
 * 4 bits, groups of 32, symmetric -> Q4_0, asymmetric -> Q4_1 (whose min is
 * an f16 offset rather than an integer zero point). Everything else is a GQ
 * type (format/qgroup.h). Per-tensor quantization (one scale for the whole
 * matrix) is stored in the per-row GQ type with every row's scale equal. */
#ifndef CLLM_QUANT_QFORMAT_H
#define CLLM_QUANT_QFORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { QF_GQ, QF_Q8_0, QF_Q4_0, QF_Q4_1 } qformat_kind;

typedef struct {
    qformat_kind kind;
    uint32_t type;   /* the wtype written */
    int bits;        /* 2, 3, 4, 8 */
    int group;       /* 32, 64, 128, or -1 for one group per row */
    bool sym;        /* zero point fixed at 2^(bits-1) */
    bool per_tensor; /* one scale and zero for the whole matrix */
    int qmin, qmax;  /* level range (Q8_0 avoids -128: qmin = 1) */
} qformat;

/* Chooses the storage for these options. allow_standard = false forces GQ
 * types (act-order output, whose column permutation llama.cpp cannot use).
 * Returns 0, or -1 with err_get() for unsupported bits or group sizes. */
int qformat_init(qformat *f, int bits, int group, bool sym, bool per_tensor, bool allow_standard);

/* Elements per group for rows of n_in (n_in itself per row or per tensor). */
int64_t qformat_group(const qformat *f, int64_t n_in);
/* 0 when rows of n_in fit the format, else -1 with err_get() naming `what`. */
int qformat_check(const qformat *f, int64_t n_in, const char *what);
size_t qformat_row_bytes(const qformat *f, int64_t n_in);

/* One group's grid, as stored. */
typedef struct {
    float scale, offset;
    int z; /* integer zero point (offset = -scale * z), GQ, Q8_0 and Q4_0 */
} qparams;

/* Round-to-nearest parameters covering the n values at x. */
void qformat_params(const qformat *f, const float *x, int64_t n, qparams *p);

static inline int qformat_level(const qformat *f, const qparams *p, float x) {
    if (p->scale == 0.0f) return p->z < f->qmin ? f->qmin : p->z > f->qmax ? f->qmax : p->z;
    const float v = (x - p->offset) / p->scale;
    if (!(v > (float)f->qmin)) return f->qmin; /* also NaN */
    if (v >= (float)f->qmax) return f->qmax;
    return (int)(v + 0.5f);
}

/* The value level q stands for, computed as the kernels dequantize it. */
static inline float qformat_value(const qformat *f, const qparams *p, int q) {
    return f->kind == QF_Q4_1 ? p->scale * (float)q + p->offset : p->scale * (float)(q - p->z);
}

/* Packs a row of n_in levels q with the parameters of each of its groups. */
void qformat_pack_row(const qformat *f, int64_t n_in, const uint8_t *q, const qparams *p, void *dst);

/* Round to nearest: quantizes an [n_out][n_in] matrix into dst (rows of
 * qformat_row_bytes), and when deq is not NULL also writes the values the
 * model will see. Returns 0, or -1 with err_get(). */
int quant_rtn(const qformat *f, const float *w, int64_t n_out, int64_t n_in, void *dst, float *deq);

/* y [n_tok][n_out] = x [n_tok][n_in] times the f32 matrix w [n_out][n_in]
 * transposed, with the registry's threaded f32 kernels. */
typedef struct threadpool threadpool;
int quant_matmul_f32(threadpool *threads, const float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok,
                     float *y);

#endif
