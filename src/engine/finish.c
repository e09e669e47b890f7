/* See finish.h. */
#include "engine/finish.h"

void finish_sequence(scheduler *sched, sequence *s, finish_reason why, const int32_t *toks, int n_toks,
                     const token_logprobs *lp, const char *text, size_t text_len, bool report) {
    request *r = s->req;
    if (s->status != SEQ_FINISHED) {
        sched_remove(sched, s);
        s->status = SEQ_FINISHED;
        s->finish = why;
        r->n_finished++;
    }
    engine_output out = {.request_id = r->id, .index = s->index, .n_new_tokens = toks ? n_toks : 0,
                         .new_tokens = toks, .logprobs = lp, .text = text, .text_len = text_len,
                         .finished = true, .reason = why, .n_prompt_tokens = s->n_prompt,
                         .n_cached_tokens = r->n_cached_tokens, .n_output_tokens = seq_n_output(s),
                         .n_evicted_tokens = s->n_evicted, .error = s->error[0] ? s->error : NULL};
    if (report) seq_attach_prompt_logprobs(s, &out);
    if (report && r->on_output) r->on_output(r->user, &out);
}
