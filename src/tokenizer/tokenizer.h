/* Tokenizers built from a model's vocabulary: SentencePiece-style (`llama` in
 * GGUF: scores, byte fallback, the U+2581 space marker; Llama 2, Gemma) and
 * byte-level BPE (`gpt2` in GGUF: merges, a pre-tokenizer regex chosen by
 * `tokenizer.ggml.pre`; GPT-2, Llama 3, Qwen2). Special tokens (control and
 * user-defined) are matched in the text before the model runs; control tokens
 * are only produced from text when the caller asks (parse_special). */
#ifndef CLLM_TOKENIZER_TOKENIZER_H
#define CLLM_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gguf_ctx gguf_ctx;
typedef struct gguf_writer gguf_writer;
typedef struct tokenizer tokenizer;

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
typedef enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
} tok_type;

/* Reads tokenizer.ggml.* metadata. NULL with err_get() naming the problem. */
tokenizer *tokenizer_from_gguf(const gguf_ctx *g);
/* Reads a Hugging Face model folder's tokenizer.json (BPE: byte-level, or
 * SentencePiece-style with byte fallback) and tokenizer_config.json. */
tokenizer *tokenizer_from_hf(const char *dir);
/* The folder's chat template (tokenizer_config.json "chat_template", or
 * chat_template.jinja) as a malloc'd string in *out, NULL when it has none.
 * Returns 0, or -1 with err_get() when a file is malformed. */
int tokenizer_hf_chat_template(const char *dir, char **out);
void tokenizer_free(tokenizer *t);
/* Writes the tokenizer as tokenizer.ggml.* metadata that tokenizer_from_gguf
 * (and llama.cpp) read back as the same tokenizer (tok_export.c). */
int tokenizer_to_gguf(const tokenizer *t, gguf_writer *w);

int32_t tokenizer_n_vocab(const tokenizer *t);
/* The most bytes of input text that one token stands for. A text of len
 * bytes has at least len / this many tokens, so a caller can refuse a text
 * too long for its context without tokenizing it. SIZE_MAX (no bound) for a
 * byte-level vocabulary that lacks some byte's token. */
size_t tokenizer_max_token_bytes(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t); /* -1 when the model has none */
int32_t tokenizer_eos(const tokenizer *t);
bool tokenizer_add_bos(const tokenizer *t);
/* SentencePiece models that put a space before the text (Llama 2; not Gemma):
 * a decoder drops that space from the first token of a sequence. */
bool tokenizer_add_space_prefix(const tokenizer *t);
/* End of generation: EOS, EOT and the chat end-of-turn tokens of the vocab. */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
tok_type tokenizer_token_type(const tokenizer *t, int32_t id);
/* The raw vocabulary string of a token (NUL-terminated), NULL if out of range. */
const char *tokenizer_token_text(const tokenizer *t, int32_t id);
/* Exact lookup of a vocabulary string; -1 when absent. */
int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len);

/* Encodes len bytes of text (need not be valid UTF-8: invalid bytes go through
 * byte fallback). add_special adds BOS/EOS as the model's flags say;
 * parse_special lets control tokens spelled in the text become those tokens.
 * Returns the count and a malloc'd array in *out, or -1 with err_get(). */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t **out);

/* A byte range of a text. */
typedef struct {
    size_t off, len;
} tok_range;
/* As tokenizer_encode, except that a control token spelled in the text is
 * not parsed where it overlaps one of the `plain` ranges (sorted, disjoint):
 * there it stays text, split into ordinary tokens, as without parse_special.
 * The rest of the text tokenizes exactly as tokenizer_encode does it, so a
 * chat prompt's request text (the ranges) cannot spell the template's
 * control tokens. User-defined tokens are matched everywhere, as always. */
int tokenizer_encode_guarded(const tokenizer *t, const char *text, size_t len, bool add_special,
                             bool parse_special, const tok_range *plain, size_t nplain, int32_t **out);

/* The bytes a token stands for (space marker and byte tokens decoded); control
 * tokens give nothing unless `special`. Returns the byte count, which may exceed
 * cap (then nothing past cap is written), or -1 for an id out of range. */
int tokenizer_token_to_piece(const tokenizer *t, int32_t id, bool special, char *buf, int cap);

#endif
