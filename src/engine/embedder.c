/* See embedder.h. A call is a job on a FIFO list; the worker hands out its
 * inputs from `next` on, and the job is finished when `done` reaches n (or
 * failed, with its message copied, when a forward pass it was in failed). */
#include "engine/embedder.h"

#include "util/error.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    const int32_t *const *ids;
    const int *lens;
    float *out;
    int n, next, done;
    bool failed;
    char err[256];
    struct job *link;
} job;

struct embedder {
    const encoder *enc;
    threadpool *threads;
    int max_batch_tokens;
    pthread_t worker;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    job *head, *tail; /* jobs with inputs not yet handed out */
    bool stop;
    embedder_stats stats;
};

/* One batch: up to `cap` inputs, each with the job it came from. */
typedef struct {
    const int32_t **ids;
    int *lens;
    job **owner;
    int *index;
    int n, cap;
} batch;

/* Takes queued inputs, oldest first, while they fit in the token budget. */
static void take_batch(embedder *eb, batch *b) {
    long tokens = 0;
    b->n = 0;
    while (eb->head && b->n < b->cap) {
        job *j = eb->head;
        const int len = j->lens[j->next];
        if (b->n > 0 && tokens + len > eb->max_batch_tokens) break;
        tokens += len;
        b->ids[b->n] = j->ids[j->next];
        b->lens[b->n] = len;
        b->owner[b->n] = j;
        b->index[b->n] = j->next;
        b->n++;
        if (++j->next == j->n) {
            eb->head = j->link;
            if (!eb->head) eb->tail = NULL;
        }
    }
}

static void *worker_main(void *arg) {
    embedder *eb = arg;
    const int d = eb->enc->hp.n_embd;
    batch b = {.cap = eb->max_batch_tokens};
    b.ids = malloc((size_t)b.cap * sizeof *b.ids);
    b.lens = malloc((size_t)b.cap * sizeof *b.lens);
    b.owner = malloc((size_t)b.cap * sizeof *b.owner);
    b.index = malloc((size_t)b.cap * sizeof *b.index);
    float *out = malloc((size_t)b.cap * (size_t)d * sizeof *out);
    const bool ok = b.ids && b.lens && b.owner && b.index && out;
    pthread_mutex_lock(&eb->mu);
    for (;;) {
        while (!eb->head && !eb->stop) pthread_cond_wait(&eb->work_cv, &eb->mu);
        if (!eb->head) break; /* stopping, and every queued input is done */
        if (!ok) { /* fail every job rather than leave callers waiting */
            for (job *j = eb->head; j; j = j->link) {
                j->failed = true;
                snprintf(j->err, sizeof j->err, "embeddings: out of memory");
                j->done = j->n;
            }
            eb->head = eb->tail = NULL;
            pthread_cond_broadcast(&eb->done_cv);
            continue;
        }
        take_batch(eb, &b);
        pthread_mutex_unlock(&eb->mu);
        const int rc = encoder_forward(eb->enc, eb->threads, b.ids, b.lens, b.n, out);
        pthread_mutex_lock(&eb->mu);
        for (int i = 0; i < b.n; i++) {
            job *j = b.owner[i];
            if (rc) {
                j->failed = true;
                snprintf(j->err, sizeof j->err, "%s", err_get());
            } else {
                memcpy(j->out + (size_t)b.index[i] * d, out + (size_t)i * d, (size_t)d * sizeof *out);
                eb->stats.tokens += (uint64_t)b.lens[i];
            }
            j->done++;
        }
        eb->stats.forward_passes++;
        eb->stats.inputs += (uint64_t)b.n;
        pthread_cond_broadcast(&eb->done_cv);
    }
    pthread_mutex_unlock(&eb->mu);
    free(out);
    free(b.index);
    free(b.owner);
    free(b.lens);
    free(b.ids);
    return NULL;
}

embedder *embedder_create(const encoder *enc, int n_threads, int max_batch_tokens) {
    embedder *eb = calloc(1, sizeof *eb);
    if (!eb) {
        err_oom("out of memory");
        return NULL;
    }
    eb->enc = enc;
    eb->max_batch_tokens = max_batch_tokens > 0 ? max_batch_tokens : 1;
    eb->threads = threadpool_create(n_threads);
    pthread_mutex_init(&eb->mu, NULL);
    pthread_cond_init(&eb->work_cv, NULL);
    pthread_cond_init(&eb->done_cv, NULL);
    if (pthread_create(&eb->worker, NULL, worker_main, eb)) {
        err_set("embeddings: cannot start the worker thread");
        threadpool_free(eb->threads);
        free(eb);
        return NULL;
    }
    return eb;
}

int embedder_embed(embedder *eb, const int32_t *const *ids, const int *lens, int n, float *out) {
    if (n <= 0) return 0;
    job j = {.ids = ids, .lens = lens, .out = out, .n = n};
    pthread_mutex_lock(&eb->mu);
    if (eb->tail) eb->tail->link = &j;
    else eb->head = &j;
    eb->tail = &j;
    pthread_cond_signal(&eb->work_cv);
    while (j.done < j.n) pthread_cond_wait(&eb->done_cv, &eb->mu);
    pthread_mutex_unlock(&eb->mu);
    return j.failed ? err_set("%s", j.err) : 0;
}

void embedder_get_stats(embedder *eb, embedder_stats *st) {
    pthread_mutex_lock(&eb->mu);
    *st = eb->stats;
    pthread_mutex_unlock(&eb->mu);
}

void embedder_free(embedder *eb) {
    if (!eb) return;
    pthread_mutex_lock(&eb->mu);
    eb->stop = true;
    pthread_cond_signal(&eb->work_cv);
    pthread_mutex_unlock(&eb->mu);
    pthread_join(eb->worker, NULL);
    pthread_cond_destroy(&eb->done_cv);
    pthread_cond_destroy(&eb->work_cv);
    pthread_mutex_destroy(&eb->mu);
    threadpool_free(eb->threads);
    free(eb);
}
