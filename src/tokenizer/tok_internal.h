/* What the tokenizer's files share: the tokenizer struct itself, the string
 * table that maps vocabulary text to ids (and BPE merge text to ranks), a
 * growable id vector and a few UTF-8 helpers. tokenizer.c loads the vocabulary
 * and splits special tokens out of the text; spm.c and bpe.c encode the plain
 * text between them; detok.c turns pieces back into whole characters. */
#ifndef CLLM_TOKENIZER_TOK_INTERNAL_H
#define CLLM_TOKENIZER_TOK_INTERNAL_H

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Open-addressing table from byte strings to dense values 0..n-1. The keys are
 * not copied: value v's key is keys[v] (lens[v] bytes), owned by the caller. */
typedef struct {
    struct strtab_slot {
        uint32_t tag; /* high bits of the hash, to skip most key compares */
        int32_t val;  /* -1: empty */
    } *slots;
    uint32_t mask;
    const char *const *keys;
    const uint32_t *lens;
} strtab;

int strtab_init(strtab *t, uint32_t n_max, const char *const *keys, const uint32_t *lens);
/* Inserts value v under keys[v]; returns v, or the value that already holds an
 * equal key (which is kept). */
int32_t strtab_insert(strtab *t, int32_t v);
int32_t strtab_find(const strtab *t, const char *s, size_t len);
/* For bulk inserts: hash ahead and prefetch the slot, then insert with it. */
uint64_t strtab_hash(const char *s, size_t len);
void strtab_prefetch(const strtab *t, uint64_t h);
int32_t strtab_insert_hashed(strtab *t, int32_t v, uint64_t h);
void strtab_free(strtab *t);

/* A growable array of token ids. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} tokvec;

int tokvec_grow(tokvec *a, size_t need);
static inline int tokvec_push(tokvec *a, int32_t id) {
    if (a->n == a->cap && tokvec_grow(a, a->n + 1)) return -1;
    a->v[a->n++] = id;
    return 0;
}

/* A piece of text being merged: a linked list over the characters. */
typedef struct {
    int32_t prev, next;
    uint32_t off, n; /* n == 0: merged into its left neighbour */
} tok_sym;

/* Cuts text into characters, llama.cpp's way (lengths from lead bytes only);
 * sym needs room for len entries. Returns the count. */
int32_t tok_split_chars(const char *text, size_t len, tok_sym *sym);

/* The merge loop: pair_key says whether two adjacent symbols merge (1, with
 * its key; 0 if not; -1 on error); the pair with the smallest key merges
 * first, the leftmost on ties, until no pair is left. */
typedef struct {
    int (*pair_key)(void *ctx, const tok_sym *l, const tok_sym *r, double *key);
    void *ctx;
    void *heap;
    size_t heap_n, heap_cap;
} tok_merge_state;

int tok_merge(tok_merge_state *m, tok_sym *sym, int32_t n);
/* A pair_key by merge rank: 1 with *rank when "left right" (built in the
 * growable *buf) is one of t's merges, 0 if not, -1 on error. */
int tok_merge_rank(const tokenizer *t, const char *text, const tok_sym *l, const tok_sym *r, char **buf,
                   size_t *cap, double *rank);
void tok_merge_free(tok_merge_state *m);

typedef enum { TOK_KIND_SPM, TOK_KIND_BPE, TOK_KIND_WORDPIECE } tok_kind;

/* Special-token trie node: children are a singly linked sibling list. */
typedef struct {
    int32_t child, sibling;
    int32_t special; /* index into tokenizer.special, or -1 */
    uint8_t byte;
} tok_trie_node;

#define TOK_MAX_PRE_REGEX 4

struct tokenizer {
    tok_kind kind;
    int32_t n_vocab;
    char *text_buf;        /* every token's text, each NUL-terminated */
    const char **text;     /* into text_buf */
    uint32_t *text_len;
    uint32_t max_text_len; /* the longest text_len */
    float *score;
    uint8_t *type;         /* tok_type, after the control-token fix-ups */
    strtab vocab;

    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix;
    /* Hugging Face Metaspace: the space prefix only at the start of the text
     * (prepend_scheme "first"), and never before a space or a U+2581. */
    bool space_prefix_first, space_prefix_not_before_space;
    int32_t *eog;          /* sorted */
    int n_eog;

    /* Control, user-defined and unknown tokens, longest text first: the order
     * in which they are cut out of the input text. */
    int32_t *special;
    int n_special;
    tok_trie_node *trie;
    int32_t n_trie;
    size_t cap_trie;
    int32_t trie_root[256]; /* first-byte children of the root, -1: none */

    /* SPM: the token for each byte of the byte fallback (-1: none). */
    int32_t byte_tok[256];

    /* BPE */
    char *merge_buf;
    const char **merge;    /* "left right", NUL-terminated */
    uint32_t *merge_len;
    int32_t n_merges;
    strtab merges;
    bool ignore_merges;
    void *re[TOK_MAX_PRE_REGEX]; /* pcre2_code_8 *, applied in order */
    int n_re;
    char byte_enc[256][3];       /* GPT-2 byte -> printable character, UTF-8 */
    uint8_t byte_enc_len[256];
    int16_t byte_dec[324];       /* that character's code point -> byte, or -1 */
    char pre[32];                /* the tokenizer.ggml.pre name of the regexes */

    /* WordPiece: the BertNormalizer's switches and the model's settings. */
    struct {
        bool clean_text, chinese_chars, strip_accents, lowercase;
        int max_chars;  /* a longer word is the unknown token */
        char prefix[8]; /* of continuation pieces: "##" (tokenizer.json), "" (GGUF) */
        char first[8];  /* of a word's first piece: "" (tokenizer.json), U+2581 (GGUF,
                         * llama.cpp's converter marks word starts instead) */
    } wp;
};

/* tokenizer.c: the steps after the vocabulary arrays are filled, shared by
 * the GGUF and Hugging Face builders. */
int tok_index_vocab(tokenizer *t);
/* FIM ids in the order pre, suf, mid, pad, rep, sep (-1: detect by text). */
int tok_finish_special(tokenizer *t, const int32_t fim[6]);
int tok_build_special(tokenizer *t);
void tok_load_byte_tokens(tokenizer *t);

/* spm.c: merges by score, or by merge rank when the vocabulary came with
 * merges (a Hugging Face tokenizer.json BPE model with byte fallback). */
int spm_encode(const tokenizer *t, const char *text, size_t len, bool space_prefix, tokvec *out);

/* bpe.c */
int bpe_init(tokenizer *t, const gguf_ctx *g);
/* The two halves of bpe_init: the byte map and the pre-tokenizer regexes of
 * a tokenizer.ggml.pre name (bpe_setup), and the merge table ("left right"
 * strings; also used by SPM vocabularies that come with merges). */
int bpe_setup(tokenizer *t, const char *pre, size_t len);
int bpe_set_merges(tokenizer *t, const gguf_str *merges, uint64_t n);
void bpe_free(tokenizer *t);
int bpe_encode(const tokenizer *t, const char *text, size_t len, tokvec *out);
/* Decodes a byte-level token text to the bytes it stands for. */
int bpe_decode_text(const tokenizer *t, const char *text, size_t len, char *buf, int cap);

/* wordpiece.c: normalizes, splits into words and encodes them (t->unk for
 * what the vocabulary cannot spell). */
int wordpiece_encode(const tokenizer *t, const char *text, size_t len, tokvec *out);
/* A normal token's text as the WordPiece decoder joins it: a continuation
 * without its prefix, any other piece after a space. tokenizer_token_to_piece's
 * contract. */
int wordpiece_piece(const tokenizer *t, const char *s, size_t n, char *buf, int cap);

/* UTF-8: the sequence length llama.cpp assumes from a lead byte (1 for
 * continuation bytes and 2..4 from the high bits, no validation). */
static inline size_t utf8_len_lax(unsigned char c) {
    static const uint8_t k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k_len[c >> 4];
}

#endif
