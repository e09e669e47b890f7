/* The HTTP side of `cllm bench serve`, on libcurl.
 *
 * Small blocking calls (easy interface) ask the server for its models and
 * drive its tokenizer while the dataset is built. The benchmark itself is one
 * thread around a multi handle: requests join at their arrival times while
 * fewer than --max-concurrency are in flight, every byte of every stream goes
 * through its own SSE parser as it arrives (the time of a chunk is the time
 * its bytes came off the socket), and a transfer that ends is judged: a
 * transport error, an HTTP status other than 200, an error event in the
 * stream or a stream that never finished makes a failed request, recorded
 * with its reason, never an abort of the run. */
#include "loadgen/serve.h"
#include "util/time.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- blocking JSON calls ---- */

/* libcurl write callback into a buf. */
static size_t to_buf(char *ptr, size_t size, size_t nmemb, void *user) {
    buf *b = user;
    buf_append(b, ptr, size * nmemb);
    return b->oom ? 0 : size * nmemb;
}

static struct curl_slist *json_headers(const char *api_key) {
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip for large bodies */
    if (api_key && *api_key) {
        char auth[1024];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", api_key);
        h = curl_slist_append(h, auth);
    }
    return h;
}

/* GET or POST (payload != NULL) into out; the HTTP status, 0 when no answer. */
static long http_call(CURL *h, const char *url, const char *api_key, const char *payload, buf *out) {
    long status = 0;
    struct curl_slist *hdrs = json_headers(api_key);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (payload) curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    return status;
}

json_t *bench_http_json(void *curl, const char *url, const char *api_key, const json_t *body, long *status) {
    char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    *status = 0;
    if (body && !payload) return NULL;
    buf out = {0};
    *status = http_call(curl, url, api_key, payload, &out);
    json_t *j = NULL;
    if (*status >= 200 && *status < 300 && out.data) j = json_loadb(out.data, out.len, 0, NULL);
    free(payload);
    buf_free(&out);
    return j;
}

double bench_metric_sum(const char *text, const char *name, bool *found) {
    const size_t n = strlen(name);
    double sum = 0;
    *found = false;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, n) || (line[n] != ' ' && line[n] != '{')) continue;
        const char *end = strchr(line, '\n');
        const char *sp = NULL; /* the value follows the line's last space */
        for (const char *c = line; c < (end ? end : line + strlen(line)); c++)
            if (*c == ' ') sp = c;
        if (!sp) continue;
        sum += strtod(sp + 1, NULL);
        *found = true;
    }
    return sum;
}

int bench_read_spec_counters(const char *base_url, const char *api_key, bench_spec_counters *out) {
    CURL *h = curl_easy_init();
    if (!h) return -1;
    char url[2048];
    snprintf(url, sizeof url, "%s/metrics", base_url);
    buf text = {0};
    const long status = http_call(h, url, api_key, NULL, &text);
    curl_easy_cleanup(h);
    bool f1 = false, f2 = false, f3 = false;
    if (status == 200 && text.data && !text.oom) {
        out->drafts = bench_metric_sum(text.data, "vllm:spec_decode_num_drafts_total", &f1);
        out->draft_tokens = bench_metric_sum(text.data, "vllm:spec_decode_num_draft_tokens_total", &f2);
        out->accepted_tokens = bench_metric_sum(text.data, "vllm:spec_decode_num_accepted_tokens_total", &f3);
    }
    buf_free(&text);
    return f1 && f2 && f3 ? 0 : -1;
}

char *bench_first_model(const char *base_url, const char *api_key) {
    CURL *h = curl_easy_init();
    if (!h) return NULL;
    char url[2048];
    snprintf(url, sizeof url, "%s/v1/models", base_url);
    long st;
    json_t *j = bench_http_json(h, url, api_key, NULL, &st);
    curl_easy_cleanup(h);
    const json_t *id = json_object_get(json_array_get(json_object_get(j, "data"), 0), "id");
    char *r = json_is_string(id) ? strdup(json_string_value(id)) : NULL;
    json_decref(j);
    return r;
}

/* ---- the server's tokenizer ---- */

static json_t *tok_call(bench_tok *t, const char *path, json_t *body) {
    char url[2048];
    snprintf(url, sizeof url, "%s%s", t->base_url, path);
    long st;
    json_t *j = bench_http_json(t->curl, url, t->api_key, body, &st);
    json_decref(body);
    return j;
}

int bench_tok_encode(bench_tok *t, const char *text, bool add_special, int32_t **ids) {
    *ids = NULL;
    json_t *body;
    if (t->style == TOK_LLAMACPP) {
        body = json_pack("{s:s,s:b}", "content", text, "add_special", add_special);
    } else {
        body = json_pack("{s:s,s:b}", "prompt", text, "add_special_tokens", add_special);
        if (body && t->model) json_object_set_new(body, "model", json_string(t->model));
    }
    if (!body) return -1;
    json_t *j = tok_call(t, "/tokenize", body);
    const json_t *arr = json_object_get(j, "tokens");
    if (!json_is_array(arr)) {
        json_decref(j);
        return -1;
    }
    const size_t n = json_array_size(arr);
    int32_t *out = malloc((n ? n : 1) * sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        /* llama.cpp answers [{"id":..,"piece":..}] when asked with_pieces */
        if (json_is_object(v)) v = json_object_get(v, "id");
        out[i] = (int32_t)json_integer_value(v);
    }
    json_decref(j);
    if (!out) return -1;
    *ids = out;
    return (int)n;
}

char *bench_tok_decode(bench_tok *t, const int32_t *ids, int n) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    json_t *body = json_pack("{s:o}", "tokens", arr);
    if (body && t->style == TOK_VLLM && t->model) json_object_set_new(body, "model", json_string(t->model));
    if (!body) return NULL;
    json_t *j = tok_call(t, "/detokenize", body);
    const json_t *s = json_object_get(j, t->style == TOK_LLAMACPP ? "content" : "prompt");
    char *r = json_is_string(s) ? strdup(json_string_value(s)) : NULL;
    json_decref(j);
    return r;
}

/* Whether /detokenize takes token id `id` (servers reject ids past the vocabulary). */
static bool id_valid(bench_tok *t, long id) {
    const int32_t one = (int32_t)id;
    char *s = bench_tok_decode(t, &one, 1);
    free(s);
    return s != NULL;
}

static long probe_vocab(bench_tok *t) {
    const long cap = 1L << 24;
    if (!id_valid(t, 0) || id_valid(t, cap)) return 0; /* no range check to find the size by */
    long lo = 0, hi = cap;                               /* lo valid, hi invalid */
    while (hi - lo > 1) {
        const long mid = lo + (hi - lo) / 2;
        if (id_valid(t, mid)) lo = mid;
        else hi = mid;
    }
    return lo + 1;
}

void bench_tok_open(bench_tok *t, const char *base_url, const char *api_key, const char *model, long vocab_hint) {
    *t = (bench_tok){.curl = curl_easy_init(), .base_url = strdup(base_url), .api_key = api_key, .model = model};
    if (!t->curl || !t->base_url) return;
    static const bench_tok_style styles[] = {TOK_VLLM, TOK_LLAMACPP};
    for (int i = 0; i < 2 && t->style == TOK_NONE; i++) {
        t->style = styles[i];
        int32_t *ids = NULL;
        const int n = bench_tok_encode(t, "Hello world", false, &ids);
        char *back = n > 0 ? bench_tok_decode(t, ids, n) : NULL;
        if (n <= 0 || !back) t->style = TOK_NONE;
        free(ids);
        free(back);
    }
    if (t->style == TOK_NONE) return;
    int32_t *a = NULL, *b = NULL;
    const int with = bench_tok_encode(t, "Hello", true, &a), without = bench_tok_encode(t, "Hello", false, &b);
    if (with >= 0 && without >= 0 && with >= without) t->n_special = with - without;
    free(a);
    free(b);
    if (vocab_hint > 0) {
        t->n_vocab = vocab_hint;
        return;
    }
    char url[2048];
    snprintf(url, sizeof url, "%s/v1/models", t->base_url);
    long st;
    json_t *j = bench_http_json(t->curl, url, t->api_key, NULL, &st);
    const json_t *nv =
        json_object_get(json_object_get(json_array_get(json_object_get(j, "data"), 0), "meta"), "n_vocab");
    if (json_is_integer(nv) && json_integer_value(nv) > 0) t->n_vocab = (long)json_integer_value(nv);
    json_decref(j);
    if (t->n_vocab == 0) t->n_vocab = probe_vocab(t);
}

void bench_tok_close(bench_tok *t) {
    if (t->curl) curl_easy_cleanup(t->curl);
    free(t->base_url);
    t->curl = NULL;
    t->base_url = NULL;
}

/* ---- the benchmark loop ---- */

typedef struct {
    CURL *h;
    struct curl_slist *hdrs;
    char *body;
    sse_parser sse;
    bench_stream *st;
    buf errbody; /* the body of a reply that is not 200 (its first 4 KiB) */
    double t0;
} inflight;

static double since(double t0) { return now_seconds() - t0; }

static void on_event(void *user, const char *data, size_t len) {
    inflight *f = user;
    bench_chunk_apply(f->st, data, len, since(f->t0));
}

static size_t on_bytes(char *ptr, size_t size, size_t nmemb, void *user) {
    inflight *f = user;
    const size_t n = size * nmemb;
    if (f->st->http_status == 0) curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &f->st->http_status);
    if (f->st->http_status != 200) {
        if (f->errbody.len < 4096) buf_append(&f->errbody, ptr, n);
        return n;
    }
    sse_feed(&f->sse, ptr, n);
    if (sse_oom(&f->sse)) return 0; /* aborts the transfer; counted as a failure */
    return n;
}

static json_t *request_body(const bench_run_opts *o, const bench_item *it) {
    json_t *j = json_object();
    if (o->model) json_object_set_new(j, "model", json_string(o->model));
    if (o->chat) {
        json_t *msgs = it->messages ? json_incref(it->messages)
                                    : json_pack("[{s:s,s:s}]", "role", "user", "content", it->prompt ? it->prompt : "");
        json_object_set_new(j, "messages", msgs);
    } else {
        json_object_set_new(j, "prompt", json_string(it->prompt ? it->prompt : ""));
    }
    /* Both vLLM and llama.cpp (where max_tokens is an alias of n_predict)
     * honour these; ignore_eos makes every request produce max_tokens. */
    json_object_set_new(j, "max_tokens", json_integer(it->output_len));
    json_object_set_new(j, "temperature", json_real(o->temperature));
    json_object_set_new(j, "ignore_eos", json_true());
    json_object_set_new(j, "stream", json_true());
    json_object_set_new(j, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (o->extra_body) json_object_update(j, (json_t *)o->extra_body);
    return j;
}

static int start_request(CURLM *multi, const bench_run_opts *o, const bench_item *it, bench_stream *st,
                         inflight *f, double t0) {
    *f = (inflight){.st = st, .t0 = t0};
    json_t *body = request_body(o, it);
    f->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    f->h = curl_easy_init();
    f->hdrs = json_headers(o->api_key);
    if (!f->body || !f->h || !f->hdrs) return -1;
    sse_init(&f->sse, on_event, f);
    curl_easy_setopt(f->h, CURLOPT_URL, o->url);
    curl_easy_setopt(f->h, CURLOPT_HTTPHEADER, f->hdrs);
    curl_easy_setopt(f->h, CURLOPT_POSTFIELDS, f->body);
    curl_easy_setopt(f->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(f->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(f->h, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(f->h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(f->h, CURLOPT_PRIVATE, f);
    if (o->timeout_s > 0) curl_easy_setopt(f->h, CURLOPT_TIMEOUT, o->timeout_s);
    st->t_start = since(t0);
    return curl_multi_add_handle(multi, f->h) == CURLM_OK ? 0 : -1;
}

/* The message of an error reply: {"error": {"message": ...}}, or the body. */
static void http_failure(inflight *f) {
    const char *body = f->errbody.data ? f->errbody.data : "";
    json_t *j = json_loadb(body, f->errbody.len, 0, NULL);
    const json_t *e = json_object_get(j, "error");
    const json_t *msg = json_is_object(e) ? json_object_get(e, "message") : e;
    if (!msg) msg = json_object_get(j, "message");
    if (json_is_string(msg))
        bench_stream_fail(f->st, "HTTP %ld: %.300s", f->st->http_status, json_string_value(msg));
    else
        bench_stream_fail(f->st, "HTTP %ld: %.300s", f->st->http_status, body);
    json_decref(j);
}

static void finish_request(CURLM *multi, inflight *f, CURLcode res) {
    bench_stream *st = f->st;
    if (st->http_status == 0) curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &st->http_status);
    st->t_end = since(f->t0);
    if (res != CURLE_OK && !(res == CURLE_WRITE_ERROR && st->error)) {
        if (sse_oom(&f->sse)) bench_stream_fail(st, "out of memory reading the stream");
        else if (st->http_status != 200 && st->http_status != 0) http_failure(f);
        else bench_stream_fail(st, "transport: %s", curl_easy_strerror(res));
    } else if (st->http_status != 200) {
        http_failure(f);
    } else {
        sse_finish(&f->sse);
        if (!st->error && !(st->done || st->finished))
            bench_stream_fail(st, "the stream ended before the request finished (no [DONE] or finish_reason)");
        else if (!st->error && st->n_text_chunks == 0)
            bench_stream_fail(st, "the stream carried no generated text");
    }
    curl_multi_remove_handle(multi, f->h);
    curl_easy_cleanup(f->h);
    curl_slist_free_all(f->hdrs);
    free(f->body);
    buf_free(&f->errbody);
    sse_free(&f->sse);
    f->h = NULL;
}

static void progress(int done, int failed, int running, int n, double t, bool final) {
    static int last_decile = -1;
    const int width = 30, fill = n ? done * width / n : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "\r[%s] %d/%d done, %d failed, %d in flight, %.1f s ", bar, done, n, failed, running, t);
        if (final) fputc('\n', stderr);
    } else {
        /* Logs get a line per tenth, not a carriage-return animation. */
        const int decile = n ? done * 10 / n : 10;
        if (decile != last_decile || final) {
            fprintf(stderr, "[%s] %d/%d done, %d failed, %d in flight, %.1f s\n", bar, done, n, failed, running, t);
            last_decile = decile;
        }
    }
}

int bench_run(const bench_run_opts *o, const bench_item *items, int n, const double *arrivals, bench_stream *streams,
              double *duration) {
    *duration = 0;
    for (int i = 0; i < n; i++) bench_stream_init(&streams[i]);
    CURLM *multi = curl_multi_init();
    inflight *fl = calloc((size_t)(n ? n : 1), sizeof *fl);
    if (!multi || !fl) {
        if (multi) curl_multi_cleanup(multi);
        free(fl);
        return -1;
    }
    const int maxc = o->max_concurrency > 0 ? o->max_concurrency : n;
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)maxc + 4);
    const double t0 = now_seconds();
    double last_draw = -1;
    int next = 0, running = 0, done = 0, failed = 0;
    while (done < n) {
        double now = since(t0);
        while (next < n && running < maxc && arrivals[next] <= now) {
            if (start_request(multi, o, &items[next], &streams[next], &fl[next], t0)) {
                bench_stream_fail(&streams[next], "could not start the request (out of memory)");
                streams[next].t_end = since(t0);
                if (fl[next].h) curl_easy_cleanup(fl[next].h);
                curl_slist_free_all(fl[next].hdrs);
                free(fl[next].body);
                fl[next].h = NULL;
                done++, failed++;
            } else {
                running++;
            }
            next++;
        }
        int still;
        curl_multi_perform(multi, &still);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            inflight *f = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&f);
            const CURLcode res = msg->data.result;
            finish_request(multi, f, res);
            running--, done++;
            if (!bench_stream_ok(f->st)) failed++;
        }
        now = since(t0);
        if (o->progress && (now - last_draw >= 0.1 || done == n)) {
            progress(done, failed, running, n, now, done == n);
            last_draw = now;
        }
        if (done == n) break;
        double wait = 0.1;
        if (next < n && running < maxc) wait = arrivals[next] - now;
        if (wait > 0.1) wait = 0.1;
        if (wait < 0) wait = 0;
        curl_multi_poll(multi, NULL, 0, (int)ceil(wait * 1000), NULL);
    }
    double first = INFINITY, last = 0;
    for (int i = 0; i < n; i++) {
        if (streams[i].t_start < first) first = streams[i].t_start;
        if (streams[i].t_end > last) last = streams[i].t_end;
    }
    *duration = n ? last - first : 0;
    free(fl);
    curl_multi_cleanup(multi);
    return 0;
}
