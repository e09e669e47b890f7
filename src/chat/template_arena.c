/* The chat-template arena and what is built on it: the byte buffer and the
 * table of named values. A parse and a render each allocate everything from
 * one arena and free it in one call; the arena's budget turns a template that
 * would exhaust memory into an error. */
#include "chat/template_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (64u << 10)

typedef struct chunk {
    struct chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} chunk;

struct tpl_arena {
    chunk *head;
    size_t spent, budget;
};

tpl_arena *tpl_ar_new(size_t budget) {
    tpl_arena *a = calloc(1, sizeof *a);
    if (!a) {
        err_oom("chat template: out of memory");
        return NULL;
    }
    a->budget = budget;
    return a;
}

void tpl_ar_free(tpl_arena *a) {
    if (!a) return;
    for (chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

void *tpl_ar_alloc(tpl_arena *a, size_t n) {
    if (n > a->budget) {
        err_set("chat template: memory limit exceeded (%zu MiB)", a->budget >> 20);
        return NULL;
    }
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > CHUNK_SIZE / 4 ? n : CHUNK_SIZE;
        if (a->spent > a->budget || size > a->budget - a->spent) {
            err_set("chat template: memory limit exceeded (%zu MiB)", a->budget >> 20);
            return NULL;
        }
        chunk *fresh = malloc(sizeof *fresh + size);
        if (!fresh) {
            err_oom("chat template: out of memory");
            return NULL;
        }
        fresh->size = size;
        fresh->used = 0;
        a->spent += size;
        if (size == CHUNK_SIZE || !c) {
            fresh->next = c;
            a->head = fresh;
        } else {
            /* A big block goes behind the current chunk so its free space stays usable. */
            fresh->next = c->next;
            c->next = fresh;
        }
        c = fresh;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void *tpl_ar_grow(tpl_arena *a, void *p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return p;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    if (ncap > SIZE_MAX / size) {
        err_set("chat template: memory limit exceeded");
        return NULL;
    }
    void *q = tpl_ar_alloc(a, ncap * size);
    if (!q) return NULL;
    if (*cap) memcpy(q, p, *cap * size);
    *cap = ncap;
    return q;
}

int tpl_tvars_set(tpl_arena *a, tvars *t, tstr name, tv v) {
    for (size_t i = 0; i < t->n; i++)
        if (tpl_tstr_eq(t->k[i], name)) {
            t->v[i] = v;
            return 0;
        }
    size_t kcap = t->cap, vcap = t->cap;
    tstr *k = tpl_ar_grow(a, t->k, &kcap, t->n + 1, sizeof *k);
    if (!k) return -1;
    t->k = k;
    tv *vv = tpl_ar_grow(a, t->v, &vcap, t->n + 1, sizeof *vv);
    if (!vv) return -1;
    t->v = vv;
    t->cap = kcap;
    t->k[t->n] = name;
    t->v[t->n++] = v;
    return 0;
}

bool tpl_tvars_get(const tvars *t, tstr name, tv *out) {
    for (size_t i = t->n; i-- > 0;)
        if (tpl_tstr_eq(t->k[i], name)) {
            *out = t->v[i];
            return true;
        }
    return false;
}

bool tpl_tstr_eq(tstr a, tstr b) {
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

bool tpl_tstr_eqc(tstr a, const char *c) {
    return tpl_tstr_eq(a, tstr_c(c));
}

/* --- sbuf -------------------------------------------------------------------- */

void tpl_sb_init(sbuf *b, tpl_arena *a, size_t limit) {
    b->ar = a;
    b->p = NULL;
    b->n = b->cap = 0;
    b->limit = limit;
}

int tpl_sb_put(sbuf *b, const void *s, size_t n) {
    if (n == 0) return 0;
    if (n > b->limit || b->n > b->limit - n)
        return err_set("chat template: output limit exceeded (%zu MiB)", b->limit >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = tpl_ar_alloc(b->ar, cap);
        if (!q) return -1;
        if (b->n) memcpy(q, b->p, b->n);
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int tpl_sb_putc(sbuf *b, char c) {
    return tpl_sb_put(b, &c, 1);
}

int tpl_sb_puts(sbuf *b, const char *s) {
    return tpl_sb_put(b, s, strlen(s));
}

int tpl_sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return err_set("chat template: formatting failed");
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    return tpl_sb_put(b, tmp, (size_t)n);
}

int tpl_sb_put_cp(sbuf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return tpl_sb_put(b, u, n);
}
