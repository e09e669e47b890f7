/* A tokenizer as tokenizer.ggml.* metadata, so that a model loaded from a
 * Hugging Face folder can be written as a GGUF file that tokenizes the same
 * way (in cllm and in llama.cpp):
 *  - byte-level BPE becomes model "gpt2" with its merges and the
 *    pre-tokenizer name the regex was recognized as;
 *  - a SentencePiece-style vocabulary becomes model "llama". GGUF's llama
 *    tokenizer merges by token score, while a tokenizer.json carries merge
 *    ranks; the ranks come from the pieces' scores in score order
 *    (tokenizers' SentencePieceExtractor), so each piece's score is minus the
 *    rank of the first merge that makes it, and pieces no merge makes (single
 *    characters, bytes, special tokens) rank below every merge;
 *  - Metaspace details GGUF cannot say go into cllm.tokenizer.* keys. */
#include "tokenizer/tok_internal.h"

#include "format/gguf_write.h"
#include "util/error.h"
#include "util/array.h"

#include <stdio.h>
#include <string.h>

#define KEY(x) "tokenizer.ggml." x

/* Minus the rank of the first merge that makes each piece. */
static float *scores_from_merges(const tokenizer *t) {
    float *score = malloc((size_t)t->n_vocab * sizeof *score);
    char *buf = NULL;
    size_t cap = 0;
    if (!score) return NULL;
    for (int32_t id = 0; id < t->n_vocab; id++) score[id] = -(float)t->n_merges - 1.0f;
    for (int32_t r = t->n_merges - 1; r >= 0; r--) { /* backwards: the first merge wins */
        const char *m = t->merge[r];
        const uint32_t len = t->merge_len[r];
        const char *sp = len >= 3 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp) continue;
        if (array_reserve((void **)&buf, &cap, len, 1)) {
            free(score);
            free(buf);
            return NULL;
        }
        const size_t left = (size_t)(sp - m);
        memcpy(buf, m, left);
        memcpy(buf + left, sp + 1, len - left - 1);
        const int32_t id = strtab_find(&t->vocab, buf, len - 1);
        if (id >= 0) score[id] = -(float)r;
    }
    free(buf);
    return score;
}

static int put_id(gguf_writer *w, const char *key, int32_t id) {
    return id >= 0 ? gguf_writer_set_u32(w, key, (uint32_t)id) : 0;
}

int tokenizer_to_gguf(const tokenizer *t, gguf_writer *w) {
    const bool spm = t->kind == TOK_KIND_SPM;
    if (gguf_writer_set_str(w, KEY("model"), spm ? "llama" : "gpt2")) return -1;
    if (!spm && gguf_writer_set_str(w, KEY("pre"), t->pre)) return -1;
    if (gguf_writer_set_arr_str(w, KEY("tokens"), t->text, (uint64_t)t->n_vocab)) return -1;
    int32_t *type = malloc((size_t)t->n_vocab * sizeof *type);
    if (!type) return err_oom("tokenizer: out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++) type[id] = t->type[id];
    int rc = gguf_writer_set_arr(w, KEY("token_type"), GGUF_TYPE_INT32, type, (uint64_t)t->n_vocab);
    free(type);
    if (rc) return -1;
    if (spm) {
        float *score = t->n_merges > 0 ? scores_from_merges(t) : NULL;
        if (t->n_merges > 0 && !score) return err_oom("tokenizer: out of memory");
        rc = gguf_writer_set_arr(w, KEY("scores"), GGUF_TYPE_FLOAT32, score ? score : t->score, (uint64_t)t->n_vocab);
        free(score);
        if (rc || gguf_writer_set_bool(w, KEY("add_space_prefix"), t->add_space_prefix)) return -1;
        /* Metaspace's "first" scheme and its no-prefix-before-a-space rule
         * have no GGUF key: cllm's own, which llama.cpp ignores. */
        if ((t->space_prefix_first && gguf_writer_set_bool(w, "cllm.tokenizer.space_prefix_first", true)) ||
            (t->space_prefix_not_before_space &&
             gguf_writer_set_bool(w, "cllm.tokenizer.space_prefix_not_before_space", true)))
            return -1;
    } else if (gguf_writer_set_arr_str(w, KEY("merges"), t->merge, (uint64_t)t->n_merges)) {
        return -1;
    }
    return put_id(w, KEY("bos_token_id"), t->bos) || put_id(w, KEY("eos_token_id"), t->eos) ||
                   put_id(w, KEY("eot_token_id"), t->eot) || put_id(w, KEY("eom_token_id"), t->eom) ||
                   put_id(w, KEY("unknown_token_id"), t->unk) || put_id(w, KEY("padding_token_id"), t->pad) ||
                   gguf_writer_set_bool(w, KEY("add_bos_token"), t->add_bos) ||
                   gguf_writer_set_bool(w, KEY("add_eos_token"), t->add_eos)
               ? -1
               : 0;
}
