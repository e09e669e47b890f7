/* Storage formats and the round-to-nearest grid of `cllm quantize`; see
 * qformat.h. The parameter choices are ggml's where a standard type is
 * written (Q4_0: the signed extreme onto level 0; Q4_1: [min, max]; Q8_0:
 * amax / 127) and the GQ quantizer's otherwise (kernels/gq.h), so RTN output
 * of a standard type matches what llama.cpp's own quantizer would write. */
#include "quant/qformat.h"

#include "kernels/gq.h"
#include "kernels/matmul.h"
#include "kernels/quants_blocks.h"
#include "kernels/wtype.h"
#include "util/error.h"
#include "util/fp16.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int qformat_init(qformat *f, int bits, int group, bool sym, bool per_tensor, bool allow_standard) {
    memset(f, 0, sizeof *f);
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
        return err_set("unsupported bit width %d (supported: 8, 4, 3, 2)", bits);
    if (per_tensor) group = -1;
    const int gc = gq_group_code(group);
    if (gc < 0) return err_set("unsupported group size %d (supported: 32, 64, 128, -1 for one group per row)", group);
    f->bits = bits;
    f->group = group;
    f->sym = sym;
    f->per_tensor = per_tensor;
    f->qmin = 0;
    f->qmax = (1 << bits) - 1;
    f->kind = QF_GQ;
    f->type = (uint32_t)gq_type(bits, gc);
    if (allow_standard && group == 32 && !per_tensor) {
        if (bits == 8 && sym) f->kind = QF_Q8_0, f->type = WT_Q8_0, f->qmin = 1;
        else if (bits == 4 && sym) f->kind = QF_Q4_0, f->type = WT_Q4_0;
        else if (bits == 4) f->kind = QF_Q4_1, f->type = WT_Q4_1;
    }
    return 0;
}

int64_t qformat_group(const qformat *f, int64_t n_in) {
    return f->group < 0 ? n_in : f->group;
}

size_t qformat_row_bytes(const qformat *f, int64_t n_in) {
    return wtype_row_size(f->type, n_in);
}

int qformat_check(const qformat *f, int64_t n_in, const char *what) {
    if (f->group > 0 && n_in % f->group)
        return err_set("%s: group size %d does not divide its rows of %" PRId64 " elements", what, f->group, n_in);
    if (n_in % 32)
        return err_set("%s: rows of %" PRId64 " elements are not a multiple of 32, which every quantized type needs",
                       what, n_in);
    if (!qformat_row_bytes(f, n_in))
        return err_set("%s: %s cannot hold rows of %" PRId64 " elements", what, wtype_name(f->type), n_in);
    return 0;
}

static float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

void qformat_params(const qformat *f, const float *x, int64_t n, qparams *p) {
    switch (f->kind) {
    case QF_Q8_0: {
        float amax = 0;
        for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
        p->scale = round_f16(amax / 127.0f);
        p->z = 128;
        break;
    }
    case QF_Q4_1: {
        float lo = x[0], hi = x[0];
        for (int64_t i = 1; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
        p->scale = round_f16((hi - lo) / 15.0f);
        p->offset = round_f16(lo);
        p->z = 0;
        return;
    }
    default: /* Q4_0 is GQ's symmetric 4-bit grid */
        gq_group_params(f->bits, f->sym, x, n, &p->scale, &p->z);
        break;
    }
    p->offset = -p->scale * (float)p->z;
}

void qformat_pack_row(const qformat *f, int64_t n_in, const uint8_t *q, const qparams *p, void *dst) {
    const int64_t g = qformat_group(f, n_in);
    uint8_t *out = dst;
    for (int64_t b = 0; b < n_in / g; b++, q += g) {
        const f16_t d = f32_to_f16(p[b].scale);
        switch (f->kind) {
        case QF_GQ:
            gq_pack_block(f->bits, g, p[b].scale, p[b].z, q, out);
            out += gq_block_bytes(f->bits, g);
            break;
        case QF_Q8_0: {
            block_q8_0 *blk = (block_q8_0 *)out;
            blk->d = d;
            for (int j = 0; j < QK8_0; j++) blk->qs[j] = (int8_t)(q[j] - 128);
            out += sizeof *blk;
            break;
        }
        case QF_Q4_0: {
            block_q4_0 *blk = (block_q4_0 *)out;
            blk->d = d;
            for (int j = 0; j < QK4_0 / 2; j++) blk->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
            out += sizeof *blk;
            break;
        }
        case QF_Q4_1: {
            block_q4_1 *blk = (block_q4_1 *)out;
            blk->d = d;
            blk->m = f32_to_f16(p[b].offset);
            for (int j = 0; j < QK4_1 / 2; j++) blk->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
            out += sizeof *blk;
            break;
        }
        }
    }
}

int quant_rtn(const qformat *f, const float *w, int64_t n_out, int64_t n_in, void *dst, float *deq) {
    const int64_t g = qformat_group(f, n_in), n_groups = n_in / g;
    const size_t rb = qformat_row_bytes(f, n_in);
    qparams whole;
    if (f->per_tensor) qformat_params(f, w, n_out * n_in, &whole);
    uint8_t *q = malloc((size_t)n_in);
    qparams *p = malloc((size_t)n_groups * sizeof *p);
    if (!q || !p) {
        free(q);
        free(p);
        return err_oom("out of memory");
    }
    for (int64_t r = 0; r < n_out; r++) {
        const float *row = w + r * n_in;
        for (int64_t b = 0; b < n_groups; b++) {
            p[b] = whole;
            if (!f->per_tensor) qformat_params(f, row + b * g, g, &p[b]);
            for (int64_t j = b * g; j < (b + 1) * g; j++) {
                q[j] = (uint8_t)qformat_level(f, &p[b], row[j]);
                if (deq) deq[r * n_in + j] = qformat_value(f, &p[b], q[j]);
            }
        }
        qformat_pack_row(f, n_in, q, p, (uint8_t *)dst + r * rb);
    }
    free(q);
    free(p);
    return 0;
}

int quant_matmul_f32(threadpool *threads, const float *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok,
                     float *y) {
    const weight wt = {.name = "quant", .data = w, .type = WT_F32, .n_in = n_in, .n_out = n_out,
                       .row_bytes = (size_t)n_in * sizeof(float)};
    const size_t need = matmul_scratch_size(&wt, (int)n_tok);
    void *scratch = need ? malloc(need + 64) : NULL;
    if (need && !scratch) return err_oom("out of memory");
    matmul(threads, &wt, x, (int)n_tok, y, scratch);
    free(scratch);
    return 0;
}
