/* Threaded matmul over the weight type registry; see matmul.h. */
#include "kernels/matmul.h"

#include <limits.h>
#include <stdlib.h>

/* Weight rows per unit of work, and activation rows per tile: 16 weight rows and
 * 16 activation rows of a few KB each stay in L1 while they are multiplied.
 * Both row counts are multiples of every gemm tile's and panel's row count, so
 * that only the last chunk of a matrix has a ragged tile.
 *
 * Small batches (below MM_STREAM_TOKENS rows) stream the weights from memory
 * and take few, large units instead: MM_STREAM_PARTS contiguous runs of rows
 * per thread (a multiple of MM_ROW_CHUNK rows each). Each thread then reads
 * one long stream that the prefetchers (and the prefetches below, which stay
 * within a unit) follow; 64-row units claimed in turn interleave the threads
 * 43 KB apart in the output head of a 640-wide model, and 2-thread decode of
 * gemma-3-270m ran at 59 tok/s against 73-97 with 2 parts per thread. */
#define MM_ROW_CHUNK 16
#define MM_STREAM_TOKENS 64
#define MM_STREAM_PARTS 2
#define MM_TOK_TILE 16

/* From this many activation rows, types with packed panels (wtype.h) pack
 * each panel of weight rows once and run all activation rows past it; below,
 * the direct tiles (same bits) are faster. Panels up to MM_PANEL_STACK bytes
 * live on the stack, larger ones on the heap. */
#define MM_PANEL_MIN_TOK 4
#define MM_PANEL_STACK (64 * 1024)

/* Weight rows a tile's rows are prefetched ahead of their use: a tile reads
 * its rows side by side, an access pattern the hardware prefetchers do not
 * follow in short rows, which leaves batch-1 decode waiting on memory (the
 * output matrix of small models: 680-byte rows). Rows longer than
 * MM_PREFETCH_MAX_ROW bytes are long enough for the hardware's streams, and
 * prefetching them as well only gets in their way (F32 rows: 0.75x). The
 * 1680-byte Q6_K rows of gemma-3-270m's ffn_down still gain from it: 1-thread
 * decode 62.4-64.4 tok/s against 58.1-61.2 with the limit at 1024. */
#define MM_PREFETCH_ROWS 8
#define MM_PREFETCH_MAX_ROW 2048

/* Bytes of a group of 8 rows in the x8 layout. */
static size_t x8_group_bytes(const wtype_traits *tr, const weight *w) {
    return tr->x8_block_bytes * (size_t)(w->n_in / tr->block_size);
}

/* ---- act-order (weight.perm): activations gathered once per matmul ---- */

static size_t perm_scratch_size(const weight *w, int n_tok) {
    return w->perm ? ((size_t)w->n_in * (size_t)n_tok * sizeof(float) + 63) / 64 * 64 : 0;
}

typedef struct {
    const weight *w;
    const float *x;
    float *out;
} perm_job;

static void gather_rows(void *p, long lo, long hi) {
    const perm_job *j = p;
    const int64_t n = j->w->n_in;
    for (long t = lo; t < hi; t++)
        for (int64_t k = 0; k < n; k++) j->out[t * n + k] = j->x[t * n + j->w->perm[k]];
}

/* ---- */

/* Bytes of a prepared activation row for the type's panels or its x8 tiles,
 * whichever is larger (0: neither prepares its activations). */
static size_t prep_row_bytes(const wtype_traits *tr, int64_t n_in) {
    size_t block = tr->panel_prep ? tr->panel_act_block_bytes : 0;
    if (tr->x8_prep && tr->x8_act_block_bytes > block) block = tr->x8_act_block_bytes;
    return block ? block * (size_t)(n_in / tr->block_size) : 0;
}

static size_t quant_scratch_size(const wtype_traits *tr, const weight *w, int n_tok) {
    return (wtype_row_size(tr->vec_dot_type, w->n_in) * (size_t)n_tok + 63) / 64 * 64;
}

size_t matmul_scratch_size(const weight *w, int n_tok) {
    const wtype_traits *tr = wtype_get(w->type);
    if (!tr || tr->vec_dot_type == WT_F32) return perm_scratch_size(w, n_tok);
    return perm_scratch_size(w, n_tok) + quant_scratch_size(tr, w, n_tok) +
           prep_row_bytes(tr, w->n_in) * (size_t)n_tok;
}

typedef struct {
    const weight *w;
    const wtype_traits *tr;
    const wtype_traits *act_tr;
    const float *x;
    const uint8_t *xq;  /* activations in vec_dot_type */
    size_t xq_row;      /* bytes per activation row */
    uint8_t *xq_out;
    bool panels;        /* through packed panels (try_panels may still decline) */
    bool x8;            /* through gemm_x8 over w->x8 */
    wtype_gemm_prep_fn prep; /* panel_prep or x8_prep, or NULL */
    uint8_t *xp;        /* the activations as prep leaves them */
    uint8_t *xq_perm;   /* matmul_multi, act-order weights: where x is gathered (x points there) */
    size_t xp_row;
    int n_tok;
    float *y;
} mm_job;

static void quantize_rows(void *p, long lo, long hi) {
    mm_job *j = p;
    const int n = (int)j->w->n_in;
    for (long t = lo; t < hi; t++) {
        j->act_tr->from_float(j->x + t * n, j->xq_out + t * j->xq_row, n);
        if (j->prep) j->prep(n, j->xq_out + t * j->xq_row, j->xp + t * j->xp_row);
    }
}

/* Weight rows [r, r_end) to prefetch towards L1, a slice at a time (a
 * burst of prefetches waits on the line fill buffers); r_end <= r_hi (the
 * unit's end). Empty for long rows. */
typedef struct {
    const uint8_t *a, *end;
} prefetch_run;

static prefetch_run rows_ahead(const weight *w, long r, long r_end) {
    prefetch_run p = {NULL, NULL};
    if (r < r_end && w->row_bytes <= MM_PREFETCH_MAX_ROW) {
        if (w->x8) { /* the groups holding the rows (r is a multiple of 8 here) */
            const size_t group = x8_group_bytes(wtype_get(w->type), w);
            p.a = (const uint8_t *)w->x8 + (size_t)(r / 8) * group;
            p.end = (const uint8_t *)w->x8 + (size_t)((r_end + 7) / 8) * group;
        } else {
            p.a = (const uint8_t *)w->data + r * w->row_bytes;
            p.end = (const uint8_t *)w->data + r_end * w->row_bytes;
        }
    }
    return p;
}

/* The next `lines` cache lines of the run. */
static void prefetch_some(prefetch_run *p, long lines) {
    for (; lines > 0 && p->a < p->end; lines--, p->a += 64)
        __builtin_prefetch(p->a);
}

/* Weight rows [r_lo, r_hi) through packed panels: each panel of rows is
 * packed once and meets every activation row, while the next panel's rows
 * are prefetched across those calls. */
static void panel_rows(const mm_job *j, long r_lo, long r_hi, uint8_t *panel, uint8_t *rows) {
    const weight *w = j->w;
    const wtype_traits *tr = j->tr;
    const int n = (int)w->n_in;
    const size_t ldy = (size_t)w->n_out;
    const long pr = tr->panel_rows;
    const uint8_t *act = j->xp ? j->xp : j->xq;
    const size_t act_row = j->xp ? j->xp_row : j->xq_row;
    const long calls = (j->n_tok + tr->panel_cols - 1) / tr->panel_cols;
    const long slice = ((long)(pr * w->row_bytes) / 64 + calls) / calls;
    for (long r = r_lo; r < r_hi; r += pr) {
        const int nr = (int)(r_hi - r < pr ? r_hi - r : pr);
        prefetch_run next = rows_ahead(w, r + pr, r + 2 * pr < r_hi ? r + 2 * pr : r_hi);
        if (w->x8) { /* nr is 8: x8 rows come in 8s */
            const uint8_t *group = (const uint8_t *)w->x8 + (size_t)(r / 8) * x8_group_bytes(tr, w);
            if (tr->x8_gemm_pack) {
                tr->x8_gemm_pack(n, group, panel);
            } else { /* the group back in row order, then packed */
                tr->x8_unpack(n, group, rows, w->row_bytes);
                tr->gemm_pack(n, nr, rows, w->row_bytes, panel);
            }
        } else {
            tr->gemm_pack(n, nr, (const uint8_t *)w->data + r * w->row_bytes, w->row_bytes, panel);
        }
        for (int t = 0; t < j->n_tok; t += tr->panel_cols) {
            const int nc = j->n_tok - t < tr->panel_cols ? j->n_tok - t : tr->panel_cols;
            prefetch_some(&next, slice);
            tr->gemm_panel(n, nr, nc, &j->y[(size_t)t * ldy + r], ldy, panel, 0, act + t * act_row,
                           act_row);
        }
    }
}

/* Runs panel_rows if the type has panels, the batch is large enough and the
 * panel's memory can be had; false otherwise. An x8 weight whose type has
 * no x8_gemm_pack also needs room for 8 rows unpacked. */
static bool try_panels(const mm_job *j, long r_lo, long r_hi) {
    const wtype_traits *tr = j->tr;
    if (!j->panels) return false;
    const size_t panel_bytes = (tr->panel_block_bytes * (size_t)(j->w->n_in / tr->block_size) + 63) / 64 * 64;
    const size_t bytes = panel_bytes + (j->w->x8 && !tr->x8_gemm_pack ? 8 * j->w->row_bytes : 0);
    if (bytes <= MM_PANEL_STACK) {
        _Alignas(64) uint8_t panel[MM_PANEL_STACK];
        panel_rows(j, r_lo, r_hi, panel, panel + panel_bytes);
        return true;
    }
    uint8_t *panel = malloc(bytes);
    if (!panel) return false;
    panel_rows(j, r_lo, r_hi, panel, panel + panel_bytes);
    free(panel);
    return true;
}

/* Weight rows [r_lo, r_hi) of an x8 weight (r_lo and r_hi multiples of 8),
 * each group of 8 against every activation row, x8_cols at a time. The
 * groups lie in order, so each thread reads one stream the hardware
 * prefetchers follow. */
static void x8_rows(const mm_job *j, long r_lo, long r_hi) {
    const weight *w = j->w;
    const wtype_traits *tr = j->tr;
    const int n = (int)w->n_in;
    const size_t ldy = (size_t)w->n_out;
    const size_t group_bytes = x8_group_bytes(tr, w);
    const uint8_t *act = j->prep ? j->xp : j->xq;
    const size_t act_row = j->prep ? j->xp_row : j->xq_row;
    for (long r = r_lo; r < r_hi; r += 8) {
        const uint8_t *group = (const uint8_t *)w->x8 + (size_t)(r / 8) * group_bytes;
        for (int t = 0; t < j->n_tok; t += tr->x8_cols) {
            const int nc = j->n_tok - t < tr->x8_cols ? j->n_tok - t : tr->x8_cols;
            tr->gemm_x8(n, 8, nc, &j->y[(size_t)t * ldy + r], ldy, group, 0, act + t * act_row, act_row);
        }
    }
}

/* Weight rows [r_lo, r_hi) against every activation row: through panels
 * where try_panels takes them; otherwise in chunks of MM_ROW_CHUNK rows, each
 * chunk against tiles of MM_TOK_TILE activation rows, and inside those the
 * type's gemm tiles (rows x activation rows), or one vec_dot per output for
 * types without them. */
static void dot_rows(void *p, long r_lo, long r_hi) {
    const mm_job *j = p;
    if (try_panels(j, r_lo, r_hi)) return;
    if (j->x8) {
        x8_rows(j, r_lo, r_hi);
        return;
    }
    const weight *w = j->w;
    const wtype_traits *tr = j->tr;
    const int n = (int)w->n_in;
    const size_t ldy = (size_t)w->n_out;
    const uint8_t *wdata = w->data;
    for (long r0 = r_lo; r0 < r_hi; r0 += MM_ROW_CHUNK) {
        const long r1 = r0 + MM_ROW_CHUNK < r_hi ? r0 + MM_ROW_CHUNK : r_hi;
        for (int t0 = 0; t0 < j->n_tok; t0 += MM_TOK_TILE) {
            const int t1 = t0 + MM_TOK_TILE < j->n_tok ? t0 + MM_TOK_TILE : j->n_tok;
            if (tr->gemm) {
                for (long r = r0; r < r1; r += tr->gemm_rows) {
                    const int nr = (int)(r1 - r < tr->gemm_rows ? r1 - r : tr->gemm_rows);
                    const long pf = r + MM_PREFETCH_ROWS;
                    if (t0 == 0) {
                        prefetch_run ahead = rows_ahead(w, pf, pf + nr < r_hi ? pf + nr : r_hi);
                        prefetch_some(&ahead, LONG_MAX);
                    }
                    for (int t = t0; t < t1; t += tr->gemm_cols) {
                        const int nc = t1 - t < tr->gemm_cols ? t1 - t : tr->gemm_cols;
                        tr->gemm(n, nr, nc, &j->y[(size_t)t * ldy + r], ldy,
                                 wdata + r * w->row_bytes, w->row_bytes, j->xq + t * j->xq_row,
                                 j->xq_row);
                    }
                }
                continue;
            }
            for (long r = r0; r < r1; r++) {
                const uint8_t *wrow = wdata + r * w->row_bytes;
                for (int t = t0; t < t1; t++)
                    tr->vec_dot(n, &j->y[(size_t)t * ldy + r], wrow, j->xq + t * j->xq_row);
            }
        }
    }
}

/* Rows per unit for a small batch: MM_STREAM_PARTS units per thread. */
static long stream_grain(const threadpool *threads, int64_t n_out) {
    const long parts = (long)threadpool_size(threads) * MM_STREAM_PARTS;
    const long rows = (long)((n_out + parts - 1) / parts);
    return (rows + MM_ROW_CHUNK - 1) / MM_ROW_CHUNK * MM_ROW_CHUNK;
}

/* A matmul's job, its activations to be quantized into scratch (when the
 * type multiplies quantized activations: act_tr set). */
static mm_job job_for(const weight *w, const float *x, int n_tok, float *y, void *scratch) {
    mm_job j = {.w = w, .tr = wtype_get(w->type), .x = x, .n_tok = n_tok, .y = y};
    if (j.tr->vec_dot_type == WT_F32) {
        j.xq = (const uint8_t *)x;
        j.xq_row = (size_t)w->n_in * sizeof(float);
        return j;
    }
    j.act_tr = wtype_get(j.tr->vec_dot_type);
    j.xq_row = wtype_row_size(j.tr->vec_dot_type, w->n_in);
    j.xq_out = scratch;
    j.xq = scratch;
    j.panels = j.tr->gemm_pack && n_tok >= (w->x8 ? j.tr->x8_panel_min_tok : MM_PANEL_MIN_TOK);
    j.x8 = w->x8 && !j.panels;
    j.prep = j.panels ? j.tr->panel_prep : j.x8 ? j.tr->x8_prep : NULL;
    if (j.prep) {
        j.xp = (uint8_t *)scratch + quant_scratch_size(j.tr, w, n_tok);
        j.xp_row = prep_row_bytes(j.tr, w->n_in);
    }
    return j;
}

void matmul(threadpool *threads, const weight *w, const float *x, int n_tok, float *y, void *scratch) {
    if (w->perm) {
        perm_job pj = {.w = w, .x = x, .out = scratch};
        threadpool_for(threads, n_tok, 4, gather_rows, &pj);
        x = pj.out;
        scratch = (uint8_t *)scratch + perm_scratch_size(w, n_tok);
    }
    mm_job j = job_for(w, x, n_tok, y, scratch);
    if (j.act_tr) threadpool_for(threads, n_tok, 4, quantize_rows, &j);
    threadpool_for(threads, w->n_out, n_tok < MM_STREAM_TOKENS ? stream_grain(threads, w->n_out) : MM_ROW_CHUNK,
           dot_rows, &j);
}

/* ---- several matmuls in one pass ---- */

/* The tasks' jobs, and where each task's activation rows and weight rows
 * start in the flat index spaces the two passes split (rows padded to
 * MM_ROW_CHUNK, so a unit never starts inside a tile or an x8 group). */
typedef struct {
    mm_job *jobs;
    long *tok_at, *row_at; /* [n + 1] */
    const float **x_in;    /* [n]: each task's activations as given; an act-order
                              task's job reads them gathered (job.x) */
    int n;
} multi_job;

static size_t multi_header_bytes(int n) {
    return ((size_t)n * (sizeof(mm_job) + sizeof(const float *)) + 2 * (size_t)(n + 1) * sizeof(long) + 63) / 64 *
           64;
}

size_t matmul_multi_scratch_size(const matmul_task *t, int n) {
    size_t bytes = multi_header_bytes(n);
    for (int i = 0; i < n; i++) bytes += (matmul_scratch_size(t[i].w, t[i].n_tok) + 63) / 64 * 64;
    return bytes;
}

size_t matmul_multi_scratch_bound(const weight *w, int n_tasks, int n_tok) {
    /* each task rounds its perm, quant and whole scratch up to 64 bytes */
    return multi_header_bytes(n_tasks) + 192 * (size_t)n_tasks + matmul_scratch_size(w, n_tok);
}

/* The task holding flat index i (at[] ascending; at[n] the end). */
static int task_at(const long *at, int n, long i) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (at[mid] <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static void multi_quantize(void *p, long lo, long hi) {
    const multi_job *m = p;
    for (int k = task_at(m->tok_at, m->n, lo); k < m->n && m->tok_at[k] < hi; k++) {
        const long a = lo > m->tok_at[k] ? lo : m->tok_at[k], b = hi < m->tok_at[k + 1] ? hi : m->tok_at[k + 1];
        if (a >= b) continue;
        mm_job *j = &m->jobs[k];
        if (j->w->perm) { /* into job.x, which this task's scratch begins with */
            perm_job pj = {.w = j->w, .x = m->x_in[k], .out = (float *)j->xq_perm};
            gather_rows(&pj, a - m->tok_at[k], b - m->tok_at[k]);
        }
        if (j->act_tr) quantize_rows(j, a - m->tok_at[k], b - m->tok_at[k]);
    }
}

static void multi_rows(void *p, long lo, long hi) {
    const multi_job *m = p;
    for (int k = task_at(m->row_at, m->n, lo); k < m->n && m->row_at[k] < hi; k++) {
        const long end = m->row_at[k] + (long)m->jobs[k].w->n_out;
        const long a = lo > m->row_at[k] ? lo : m->row_at[k], b = hi < end ? hi : end;
        if (a < b) dot_rows(&m->jobs[k], a - m->row_at[k], b - m->row_at[k]);
    }
}

void matmul_multi(threadpool *threads, const matmul_task *t, int n, void *scratch) {
    if (n <= 0) return;
    multi_job m = {.jobs = scratch, .n = n};
    m.tok_at = (long *)(m.jobs + n);
    m.row_at = m.tok_at + n + 1;
    m.x_in = (const float **)(m.row_at + n + 1);
    uint8_t *at = (uint8_t *)scratch + multi_header_bytes(n);
    int max_tok = 0;
    m.tok_at[0] = m.row_at[0] = 0;
    for (int i = 0; i < n; i++) {
        const size_t perm = perm_scratch_size(t[i].w, t[i].n_tok);
        m.x_in[i] = t[i].x;
        m.jobs[i] = job_for(t[i].w, perm ? (const float *)at : t[i].x, t[i].n_tok, t[i].y, at + perm);
        m.jobs[i].xq_perm = perm ? at : NULL;
        at += (matmul_scratch_size(t[i].w, t[i].n_tok) + 63) / 64 * 64;
        m.tok_at[i + 1] = m.tok_at[i] + t[i].n_tok;
        m.row_at[i + 1] = m.row_at[i] + (long)((t[i].w->n_out + MM_ROW_CHUNK - 1) / MM_ROW_CHUNK * MM_ROW_CHUNK);
        if (t[i].n_tok > max_tok) max_tok = t[i].n_tok;
    }
    threadpool_for(threads, m.tok_at[n], 4, multi_quantize, &m);
    const long rows = m.row_at[n];
    threadpool_for(threads, rows, max_tok < MM_STREAM_TOKENS ? stream_grain(threads, rows) : MM_ROW_CHUNK, multi_rows,
                   &m);
}

size_t weight_repack_size(const weight *w) {
    const wtype_traits *tr = wtype_get(w->type);
    if (!tr || !tr->gemm_x8 || w->perm || w->x8 || w->n_out % 8) return 0;
    return (size_t)(w->n_out / 8) * x8_group_bytes(tr, w);
}

typedef struct {
    const weight *w;
    const wtype_traits *tr;
    uint8_t *out;
} repack_job;

static void repack_groups(void *p, long lo, long hi) {
    const repack_job *j = p;
    const size_t rows = 8 * j->w->row_bytes, group = x8_group_bytes(j->tr, j->w);
    for (long g = lo; g < hi; g++)
        j->tr->x8_pack((int)j->w->n_in, (const uint8_t *)j->w->data + g * rows, j->w->row_bytes, j->out + g * group);
}

void weight_repack(weight *w, void *buf, threadpool *threads) {
    if (!weight_repack_size(w)) return;
    repack_job j = {.w = w, .tr = wtype_get(w->type), .out = buf};
    threadpool_for(threads, w->n_out / 8, 64, repack_groups, &j);
    w->x8 = buf;
}

void weight_row_to_float(const weight *w, int64_t r, float *out) {
    wtype_get(w->type)->to_float((const uint8_t *)w->data + r * w->row_bytes, out, w->n_in);
}
