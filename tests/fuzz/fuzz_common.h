/* Shared by the libFuzzer harnesses of tests/fuzz: the in-memory GGUF image
 * builder of the unit tests (tests/unit/gguf_image.h, its cmocka assertion
 * made an abort), a small SentencePiece and a small byte-level BPE
 * vocabulary built with it, splitting one fuzz input into several files,
 * and a private temporary folder to write them into. Each harness includes
 * this once; every function is static inline. */
#ifndef CLLM_TESTS_FUZZ_COMMON_H
#define CLLM_TESTS_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* gguf_image.h asserts with cmocka; in a harness a failed setup is a crash. */
#define assert_non_null(p) \
    do {                   \
        if (!(p)) abort(); \
    } while (0)
#include "../unit/gguf_image.h"

/* Every harness input may hold several parts separated by this line, so a
 * seed is still readable text and a mutation can move a separator. */
#define FUZZ_PART_SEP "\n#####\n"
#define FUZZ_MAX_PARTS 8

typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_part;

/* Splits data at FUZZ_PART_SEP into at most max parts (the last takes the
 * rest); returns how many. Parts point into data. */
static inline int fuzz_split(const uint8_t *data, size_t size, fuzz_part *parts, int max) {
    const size_t sep_len = strlen(FUZZ_PART_SEP);
    int n = 0;
    size_t start = 0;
    while (n < max - 1) {
        const uint8_t *hit = size - start >= sep_len ? memmem(data + start, size - start, FUZZ_PART_SEP, sep_len) : NULL;
        if (!hit) break;
        parts[n++] = (fuzz_part){data + start, (size_t)(hit - (data + start))};
        start = (size_t)(hit - data) + sep_len;
    }
    parts[n++] = (fuzz_part){data + start, size - start};
    return n;
}

/* A NUL-terminated copy (fuzz bytes are not terminated). */
static inline char *fuzz_cstr(const uint8_t *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* A folder of its own under $TMPDIR for this process, made once and reused
 * for every input (the files in it are overwritten or removed each time). */
static inline const char *fuzz_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/cllm-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

/* Writes (or, when p is NULL, removes) dir/name. */
static inline void fuzz_write_file(const char *dir, const char *name, const uint8_t *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!p) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    fclose(f);
}

/* Encodes a text with spaces, control tokens, two scripts and an invalid
 * byte, and decodes what came out: a vocabulary the reader accepted must
 * also work. */
static inline void fuzz_use_tokenizer(const tokenizer *t) {
    static const char k_text[] = "Hello world <s> <|im_start|> \xe2\x96\x81\xc3\xa9 123 \xff";
    int32_t *ids = NULL;
    int n = tokenizer_encode(t, k_text, sizeof k_text - 1, true, true, &ids);
    char piece[64];
    for (int i = 0; i < n; i++) tokenizer_token_to_piece(t, ids[i], true, piece, sizeof piece);
    free(ids);
}

/* --- two small vocabularies (as in tests/unit/test_tokenizer.c) ---------- */

/* SentencePiece: control, user-defined and normal pieces with scores, the
 * U+2581 space marker and all 256 byte tokens. */
static inline tokenizer *fuzz_spm_tokenizer(bool space_prefix) {
    static const char *const k_pieces[] = {"<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>",
                                           "<div>", "\xe2\x96\x81", "a", "b", "h", "e", "l", "o",
                                           "ab", "he", "ll", "llo", "hello", "\xe2\x96\x81hello", "\xc3\xa9"};
    static const int32_t k_types[] = {TOK_TYPE_UNKNOWN, TOK_TYPE_CONTROL, TOK_TYPE_CONTROL, TOK_TYPE_CONTROL,
                                      TOK_TYPE_CONTROL, TOK_TYPE_USER_DEFINED};
    enum { N_PIECES = sizeof k_pieces / sizeof k_pieces[0], N = N_PIECES + 256 };
    const char *texts[N];
    float scores[N];
    int32_t types[N];
    for (int i = 0; i < N_PIECES; i++) {
        texts[i] = k_pieces[i];
        scores[i] = -(float)(i % 5);
        types[i] = i < 6 ? k_types[i] : TOK_TYPE_NORMAL;
    }
    spm_byte_tokens(texts, scores, types, N_PIECES);
    image b = image_new();
    kv_spm_vocab(&b, texts, scores, types, N, 1, 2, space_prefix);
    tokenizer *t = image_load(&b);
    if (!t) abort();
    return t;
}

/* Byte-level BPE with merges ("Ġ" is GPT-2's space byte) and one control
 * token; `pre` picks the pre-tokenizer regex (gpt2, llama3, qwen2, ...). */
static inline tokenizer *fuzz_bpe_tokenizer(const char *pre) {
    static const char *const k_tokens[] = {"h", "e", "l", "o", "w", "r", "d", "\xc4\xa0", "1", "2", "3",
                                           "he", "ll", "hell", "hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "12",
                                           "wd", "<|endoftext|>", "\xc3\x83\xc2\xa9", "<|im_start|>"};
    static const char *const k_merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w",
                                           "o r", "\xc4\xa0w or", "1 2", "\xc3\x83 \xc2\xa9"};
    enum { N = sizeof k_tokens / sizeof k_tokens[0], N_MERGES = sizeof k_merges / sizeof k_merges[0] };
    int32_t types[N];
    for (int i = 0; i < N; i++) types[i] = i >= 20 && i != 21 ? TOK_TYPE_CONTROL : TOK_TYPE_NORMAL;
    image b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", pre);
    kv_strs(&b, "tokenizer.ggml.tokens", k_tokens, N);
    kv_i32s(&b, "tokenizer.ggml.token_type", types, N);
    kv_strs(&b, "tokenizer.ggml.merges", k_merges, N_MERGES);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 20);
    tokenizer *t = image_load(&b);
    if (!t) abort();
    return t;
}

/* WordPiece as llama.cpp's GGUF stores BERT's (tokenizer.ggml.model "bert":
 * U+2581 marks a word's first piece, continuations are bare), with [CLS]
 * and [SEP] added around the text and the uncased BERT normalizer. */
static inline tokenizer *fuzz_wordpiece_tokenizer(void) {
    static const char *const k_tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81hello", "\xe2\x96\x81he",
                                           "llo", "l", "o", "\xe2\x96\x81" "a", "\xe2\x96\x81" "e", "b",
                                           "\xe2\x96\x81!", "\xe2\x96\x81\xe4\xbd\xa0", "\xe2\x96\x81i",
                                           "\xcc\x87", "\xe2\x96\x81\xcf\x83"};
    enum { N = sizeof k_tokens / sizeof k_tokens[0] };
    int32_t types[N];
    for (int i = 0; i < N; i++) types[i] = i == 1 ? TOK_TYPE_UNKNOWN : i < 4 ? TOK_TYPE_CONTROL : TOK_TYPE_NORMAL;
    image b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "bert");
    kv_strs(&b, "tokenizer.ggml.tokens", k_tokens, N);
    kv_i32s(&b, "tokenizer.ggml.token_type", types, N);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&b, "tokenizer.ggml.seperator_token_id", 3);
    kv_u32(&b, "tokenizer.ggml.unknown_token_id", 1);
    tokenizer *t = image_load(&b);
    if (!t) abort();
    return t;
}

#endif
