/* Ending a sequence: the one place a sequence leaves the schedule, counts as
 * finished for its request, and (when reported) hands its last output to the
 * request's callback. The step loop (engine.c) and beam search (beam.c) both
 * end sequences through here, so neither needs to call the other. */
#ifndef CLLM_ENGINE_FINISH_H
#define CLLM_ENGINE_FINISH_H

#include "engine/request.h"
#include "engine/scheduler.h"

/* toks[0..n_toks) are the last new tokens (NULL: none), lp their logprobs
 * (NULL: not asked for), text[0..text_len) the text they release. A sequence
 * that already finished is not ended twice, only reported. report is false
 * for a request's slots past the n outputs it asked for (beam search keeps
 * beam_width of them). */
void finish_sequence(scheduler *sched, sequence *s, finish_reason why, const int32_t *toks, int n_toks,
                     const token_logprobs *lp, const char *text, size_t text_len, bool report);

#endif
