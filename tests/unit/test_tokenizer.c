/* Tokenizers on small vocabularies built here as in-memory GGUF images:
 * SentencePiece merges by score (leftmost on ties), byte fallback, special
 * tokens (longest first, control tokens only when parsed, user-defined always,
 * the space prefix after them), BOS/EOS, end-of-generation tokens and pieces;
 * byte-level BPE merges by rank, the pre-tokenizer split, Llama 3's whole-word
 * match; the streaming detokenizer's UTF-8 safety; and every load error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/gguf.h"
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_image.h"

/* --- a SentencePiece vocabulary ------------------------------------------ */

enum { UNK, BOS, EOS, SOT, EOT, DIV, DIV2, SP, A, B, C, H, E, L, O, AB, BC, HE, LL, LO, LLO, HELLO,
       SP_HELLO, XY, N_SPM };
#define BYTE(b) (N_SPM + (b))

typedef struct {
    const char *text;
    float score;
    int32_t type;
} tdef;

static const tdef k_spm[N_SPM] = {
    [UNK] = {"<unk>", 0, TOK_TYPE_UNKNOWN},
    [BOS] = {"<s>", 0, TOK_TYPE_CONTROL},
    [EOS] = {"</s>", 0, TOK_TYPE_CONTROL},
    [SOT] = {"<start_of_turn>", 0, TOK_TYPE_CONTROL},
    [EOT] = {"<end_of_turn>", 0, TOK_TYPE_NORMAL}, /* made a control token by its text */
    [DIV] = {"<div>", 0, TOK_TYPE_USER_DEFINED},
    [DIV2] = {"<div><div>", 0, TOK_TYPE_USER_DEFINED},
    [SP] = {"\xe2\x96\x81", -2, TOK_TYPE_NORMAL},
    [A] = {"a", -3, TOK_TYPE_NORMAL},
    [B] = {"b", -3, TOK_TYPE_NORMAL},
    [C] = {"c", -3, TOK_TYPE_NORMAL},
    [H] = {"h", -3, TOK_TYPE_NORMAL},
    [E] = {"e", -3, TOK_TYPE_NORMAL},
    [L] = {"l", -3, TOK_TYPE_NORMAL},
    [O] = {"o", -3, TOK_TYPE_NORMAL},
    [AB] = {"ab", -1, TOK_TYPE_NORMAL},
    [BC] = {"bc", -1, TOK_TYPE_NORMAL}, /* ties with "ab": the left pair wins */
    [HE] = {"he", -1.5f, TOK_TYPE_NORMAL},
    [LL] = {"ll", -1.5f, TOK_TYPE_NORMAL},
    [LO] = {"lo", -1.4f, TOK_TYPE_NORMAL}, /* beats "ll" and "he" */
    [LLO] = {"llo", -1.3f, TOK_TYPE_NORMAL},
    [HELLO] = {"hello", -1, TOK_TYPE_NORMAL},
    [SP_HELLO] = {"\xe2\x96\x81hello", -0.5f, TOK_TYPE_NORMAL},
    [XY] = {"xy", -1, TOK_TYPE_NORMAL}, /* its characters are not tokens */
};

typedef struct {
    bool space_prefix, add_eos;
} spm_opts;

static tokenizer *spm_load(spm_opts o) {
    const char *texts[N_SPM + 256];
    float scores[N_SPM + 256];
    int32_t types[N_SPM + 256];
    for (int i = 0; i < N_SPM; i++) {
        texts[i] = k_spm[i].text;
        scores[i] = k_spm[i].score;
        types[i] = k_spm[i].type;
    }
    spm_byte_tokens(texts, scores, types, N_SPM);
    image b = image_new();
    kv_spm_vocab(&b, texts, scores, types, N_SPM + 256, BOS, EOS, o.space_prefix);
    if (o.add_eos) kv_bool(&b, "tokenizer.ggml.add_eos_token", true);
    tokenizer *t = image_load(&b);
    if (!t) fail_msg("%s", err_get());
    return t;
}

/* Encodes and compares with the expected ids (terminated by -1). */
static void expect_ids(const tokenizer *t, const char *text, size_t len, bool add_special,
                       bool parse_special, const int32_t *want) {
    int32_t *ids = NULL;
    int n = tokenizer_encode(t, text, len, add_special, parse_special, &ids);
    if (n < 0) fail_msg("encode: %s", err_get());
    int m = 0;
    while (want[m] >= 0) m++;
    char got[512] = "", exp[512] = "";
    for (int i = 0; i < n && strlen(got) < 480; i++) snprintf(got + strlen(got), 32, " %d", ids[i]);
    for (int i = 0; i < m; i++) snprintf(exp + strlen(exp), 32, " %d", want[i]);
    if (strcmp(got, exp)) fail_msg("'%s': got [%s ] want [%s ]", text, got, exp);
    free(ids);
}
#define EXPECT(t, text, add, parse, ...)                                                          \
    expect_ids(t, text, strlen(text), add, parse, (const int32_t[]){__VA_ARGS__, -1})
#define EXPECT_NONE(t, text, add, parse) expect_ids(t, text, strlen(text), add, parse, (const int32_t[]){-1})

static void test_spm_merges_highest_score_first_leftmost_on_ties(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){false, false});
    EXPECT(t, "abc", false, false, AB, C);
    EXPECT(t, "bc", false, false, BC);
    /* "lo" (-1.4) beats "he" and "ll" (-1.5); then "he", then "llo", "hello" */
    EXPECT(t, "hello", false, false, HELLO);
    EXPECT(t, "hel", false, false, HE, L);
    EXPECT(t, "xy", false, false, XY);
    EXPECT(t, "x", false, false, BYTE('x'));
    EXPECT_NONE(t, "", false, false);
    tokenizer_free(t);
}

static void test_spm_space_prefix_and_escaped_spaces(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){true, false});
    EXPECT(t, "hello", false, false, SP_HELLO);
    EXPECT(t, "hello", true, false, BOS, SP_HELLO);
    EXPECT(t, "a hello", false, false, SP, A, SP_HELLO);
    /* after a special token the raw text gets the prefix again */
    EXPECT(t, "<div>hello", false, false, DIV, SP_HELLO);
    EXPECT(t, "a<div>hello", false, false, SP, A, DIV, SP_HELLO);
    EXPECT(t, "", true, false, BOS);
    tokenizer_free(t);
}

static void test_spm_byte_fallback(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){false, false});
    EXPECT(t, "\xc3\xa9", false, false, BYTE(0xC3), BYTE(0xA9));
    EXPECT(t, "\xf0\x9f\x98\x80", false, false, BYTE(0xF0), BYTE(0x9F), BYTE(0x98), BYTE(0x80));
    /* invalid UTF-8 goes byte by byte too; a lone lead byte takes what follows */
    EXPECT(t, "\xff" "a", false, false, BYTE(0xFF), BYTE('a'));
    EXPECT(t, "\xe4" "ab", false, false, BYTE(0xE4), BYTE('a'), BYTE('b'));
    expect_ids(t, "a\0b", 3, false, false, (const int32_t[]){A, BYTE(0), B, -1});
    tokenizer_free(t);
}

static void test_spm_special_tokens(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){false, false});
    /* control tokens only when parsed; user-defined tokens always */
    EXPECT(t, "<start_of_turn>ab", false, true, SOT, AB);
    int32_t *ids;
    int n = tokenizer_encode(t, "<start_of_turn>", 15, false, false, &ids);
    assert_true(n > 1);
    for (int i = 0; i < n; i++) assert_int_not_equal(ids[i], SOT);
    free(ids);
    EXPECT(t, "a<div>b", false, false, A, DIV, B);
    /* the longest special token is cut out first */
    EXPECT(t, "<div><div>", false, false, DIV2);
    EXPECT(t, "<div><div><div>", false, false, DIV2, DIV);
    EXPECT(t, "<end_of_turn><s>", false, true, EOT, BOS);
    EXPECT(t, "ab</s>", true, true, BOS, AB, EOS);
    tokenizer_free(t);
}

/* Control tokens are not parsed where they overlap a plain range (request
 * text in a chat prompt): there the text is what plain encoding gives. */
static void test_spm_control_tokens_stay_text_in_plain_ranges(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){false, false});
    /* template "<start_of_turn>" + content "ab<start_of_turn><div>" + template "<end_of_turn>" */
    const char *text = "<start_of_turn>ab<start_of_turn><div><end_of_turn>";
    const tok_range content[] = {{15, 22}};
    int32_t *ids, *plain;
    int n = tokenizer_encode_guarded(t, text, strlen(text), false, true, content, 1, &ids);
    int np = tokenizer_encode(t, text + 15, 22, false, false, &plain);
    assert_true(n > 2 && np > 2);
    assert_int_equal(n, np + 2);
    assert_int_equal(ids[0], SOT);
    assert_memory_equal(ids + 1, plain, (size_t)np * sizeof *ids); /* user-defined <div> still matched */
    assert_int_equal(ids[n - 1], EOT);
    free(ids);
    free(plain);
    /* a control token that only straddles a range's edge is text too */
    const tok_range edge[] = {{0, 1}, {17, 1}};
    n = tokenizer_encode_guarded(t, "<s>ab<end_of_turn>", 18, false, true, edge, 2, &ids);
    for (int i = 0; i < n; i++) assert_true(ids[i] != BOS && ids[i] != EOT);
    free(ids);
    /* no ranges: exactly tokenizer_encode */
    EXPECT(t, "<start_of_turn>ab", false, true, SOT, AB);
    n = tokenizer_encode_guarded(t, "<start_of_turn>ab", 17, false, true, NULL, 0, &ids);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], SOT);
    free(ids);
    tokenizer_free(t);
}

static void test_spm_bos_eos_and_eog(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){false, true});
    EXPECT(t, "ab", true, false, BOS, AB, EOS);
    EXPECT(t, "ab", false, false, AB);
    assert_int_equal(tokenizer_bos(t), BOS);
    assert_int_equal(tokenizer_eos(t), EOS);
    assert_true(tokenizer_add_bos(t));
    assert_true(tokenizer_is_eog(t, EOS));
    assert_true(tokenizer_is_eog(t, EOT));
    assert_false(tokenizer_is_eog(t, SOT));
    assert_false(tokenizer_is_eog(t, BOS));
    assert_int_equal(tokenizer_token_type(t, EOT), TOK_TYPE_CONTROL);
    assert_int_equal(tokenizer_token_type(t, DIV), TOK_TYPE_USER_DEFINED);
    assert_int_equal(tokenizer_n_vocab(t), N_SPM + 256);
    assert_int_equal(tokenizer_find(t, "hello", 5), HELLO);
    assert_int_equal(tokenizer_find(t, "hellO", 5), -1);
    assert_string_equal(tokenizer_token_text(t, BYTE(0x41)), "<0x41>");
    assert_null(tokenizer_token_text(t, N_SPM + 256));
    tokenizer_free(t);
}

static void expect_piece(const tokenizer *t, int32_t id, bool special, const char *want) {
    char buf[64];
    int n = tokenizer_token_to_piece(t, id, special, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(want));
    assert_memory_equal(buf, want, strlen(want));
}

static void test_spm_pieces(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){true, false});
    expect_piece(t, SP_HELLO, false, " hello");
    expect_piece(t, BYTE(0x41), false, "A");
    expect_piece(t, BYTE(0xFF), false, "\xff");
    expect_piece(t, BOS, false, "");
    expect_piece(t, BOS, true, "<s>");
    expect_piece(t, UNK, false, "");
    expect_piece(t, UNK, true, "<unk>");
    expect_piece(t, DIV, false, "<div>");
    assert_int_equal(tokenizer_token_to_piece(t, -1, false, NULL, 0), -1);
    assert_int_equal(tokenizer_token_to_piece(t, N_SPM + 256, false, NULL, 0), -1);
    /* too small a buffer: the full length, nothing written past cap */
    char buf[4] = "zzz";
    assert_int_equal(tokenizer_token_to_piece(t, SP_HELLO, false, buf, 3), 6);
    assert_memory_equal(buf, " he", 3);
    assert_int_equal(tokenizer_token_to_piece(t, SP_HELLO, false, NULL, 0), 6);
    tokenizer_free(t);
}

/* --- detokenizer --------------------------------------------------------- */

/* Pushes ids and returns everything written, flushed at the end. */
static void expect_stream(const tokenizer *t, const int32_t *ids, int n, const size_t *per_token,
                          const char *want) {
    detok_state st = {0};
    char out[256];
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        size_t k = detok_push(t, &st, ids[i], false, out + w, sizeof out - w);
        if (per_token) assert_int_equal(k, per_token[i]);
        w += k;
    }
    w += detok_flush(&st, out + w, sizeof out - w);
    assert_int_equal(w, strlen(want));
    assert_memory_equal(out, want, w);
}

static void test_detok_holds_split_characters(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){true, false});
    const int32_t emoji[] = {BYTE(0xF0), BYTE(0x9F), BYTE(0x98), BYTE(0x80)};
    expect_stream(t, emoji, 4, (const size_t[]){0, 0, 0, 4}, "\xf0\x9f\x98\x80");
    const int32_t mixed[] = {SP_HELLO, BYTE(0xC3), BYTE(0xA9), A, BOS};
    expect_stream(t, mixed, 5, (const size_t[]){6, 0, 2, 1, 0}, " hello\xc3\xa9" "a");
    tokenizer_free(t);
}

static void test_detok_replaces_invalid_bytes_once_certain(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){true, false});
    /* 0xFF can never start a character: replaced at once */
    expect_stream(t, (const int32_t[]){BYTE(0xFF)}, 1, (const size_t[]){3}, "\xef\xbf\xbd");
    /* a stray continuation byte */
    expect_stream(t, (const int32_t[]){BYTE(0x80), A}, 2, (const size_t[]){3, 1}, "\xef\xbf\xbd" "a");
    /* an unfinished 3-byte sequence waits, then one U+FFFD when "a" breaks it */
    expect_stream(t, (const int32_t[]){BYTE(0xE4), BYTE(0xBD), A}, 3, (const size_t[]){0, 0, 4},
                  "\xef\xbf\xbd" "a");
    /* a surrogate (ED A0 ..) is not UTF-8: each byte is its own bad subpart */
    expect_stream(t, (const int32_t[]){BYTE(0xED), BYTE(0xA0)}, 2, (const size_t[]){0, 6},
                  "\xef\xbf\xbd\xef\xbf\xbd");
    /* the stream ends inside a character */
    expect_stream(t, (const int32_t[]){A, BYTE(0xF0), BYTE(0x9F)}, 3, (const size_t[]){1, 0, 0},
                  "a\xef\xbf\xbd");
    /* out-of-range ids write nothing */
    expect_stream(t, (const int32_t[]){-5, N_SPM + 256}, 2, (const size_t[]){0, 0}, "");
    tokenizer_free(t);
}

static void test_detok_respects_cap(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){true, false});
    detok_state st = {0};
    char out[8];
    assert_int_equal(detok_push(t, &st, BYTE(0xFF), false, out, 2), 0); /* U+FFFD needs 3 */
    assert_int_equal(DETOK_MAX_OUT(6), 30);
    tokenizer_free(t);
}

/* --- byte-level BPE ------------------------------------------------------ */

/* "Ġ" is GPT-2's stand-in for the space byte. */
static const char *const k_bpe_tokens[] = {
    "h", "e", "l", "o", "w", "r", "d", "\xc4\xa0", "1", "2", "3",      /* 0..10 */
    "he", "ll", "hell", "hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "12", /* 11..18 */
    "wd", "<|endoftext|>", "\xc3\x83\xc2\xa9", /* 19..21; the last is "é" as bytes C3 A9 */
};
static const char *const k_bpe_merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w",
                                           "o r", "\xc4\xa0w or", "1 2", "\xc3\x83 \xc2\xa9"};
enum { T_H, T_E, T_L, T_O, T_W, T_R, T_D, T_G, T_1, T_2, T_3, T_HE, T_LL, T_HELL, T_HELLO, T_GW,
       T_OR, T_GWOR, T_12, T_WD, T_EOT, T_EACUTE, N_BPE };

static tokenizer *bpe_load(const char *pre, bool with_merges, bool add_bos) {
    int32_t types[N_BPE];
    for (int i = 0; i < N_BPE; i++) types[i] = i == T_EOT ? TOK_TYPE_CONTROL : TOK_TYPE_NORMAL;
    image b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    if (pre) kv_str(&b, "tokenizer.ggml.pre", pre);
    kv_strs(&b, "tokenizer.ggml.tokens", k_bpe_tokens, N_BPE);
    kv_i32s(&b, "tokenizer.ggml.token_type", types, N_BPE);
    if (with_merges) kv_strs(&b, "tokenizer.ggml.merges", k_bpe_merges, 9);
    if (add_bos) kv_bool(&b, "tokenizer.ggml.add_bos_token", true);
    return image_load(&b);
}

static void test_bpe_merges_by_rank(void **state) {
    (void)state;
    tokenizer *t = bpe_load("qwen2", true, false);
    if (!t) fail_msg("%s", err_get());
    EXPECT(t, "hello", false, false, T_HELLO);
    /* " world" is one word: "Ġ w" (rank 4) before "o r" (5), then "Ġw or" */
    EXPECT(t, "hello world", false, false, T_HELLO, T_GWOR, T_L, T_D);
    EXPECT(t, "hel", false, false, T_HE, T_L);
    /* Qwen2 splits digits one by one, so "1 2" never applies */
    EXPECT(t, "123", false, false, T_1, T_2, T_3);
    EXPECT(t, "wd", false, false, T_W, T_D);
    EXPECT(t, "\xc3\xa9", false, false, T_EACUTE);
    EXPECT(t, "he<|endoftext|>", false, true, T_HE, T_EOT);
    assert_true(tokenizer_is_eog(t, T_EOT));
    assert_false(tokenizer_add_bos(t));
    expect_piece(t, T_GWOR, false, " wor");
    expect_piece(t, T_EACUTE, false, "\xc3\xa9");
    expect_piece(t, T_EOT, false, "");
    expect_piece(t, T_EOT, true, "<|endoftext|>");
    tokenizer_free(t);
}

static void test_bpe_llama3_whole_words_and_digit_triples(void **state) {
    (void)state;
    tokenizer *t = bpe_load("llama-bpe", true, false);
    if (!t) fail_msg("%s", err_get());
    EXPECT(t, "123", false, false, T_12, T_3);
    /* "wd" is in the vocabulary: Llama 3 takes it without merges */
    EXPECT(t, "wd", false, false, T_WD);
    tokenizer_free(t);
}

/* tokenizer_max_token_bytes is a true bound: no text of len bytes gives
 * fewer than len / max tokens, whatever it holds (words, spaces, special
 * tokens, invalid UTF-8, code points past U+10FFFF). */
static void check_token_bound(const tokenizer *t, uint64_t seed) {
    static const char *const pieces[] = {"hello", " ", "  ", "\xe2\x96\x81", "<div>", "<|endoftext|>",
                                         "\xf7\xbf\xbf\xbf", "\xff", "\xc3\xa9", "wd", "123", "a", "\n", " world"};
    const size_t max = tokenizer_max_token_bytes(t);
    assert_true(max >= 1 && max < 1000);
    char text[512];
    for (int round = 0; round < 300; round++) {
        size_t len = 0;
        for (;;) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = pieces[(seed >> 33) % (sizeof pieces / sizeof *pieces)];
            if (len + strlen(p) >= sizeof text) break;
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
            if ((seed >> 20) % 16 == 0) break;
        }
        int32_t *ids = NULL;
        const int n = tokenizer_encode(t, text, len, false, round % 2 == 0, &ids);
        if (n < 0) fail_msg("encode: %s", err_get());
        if ((size_t)n * max < len)
            fail_msg("%zu bytes gave %d tokens, under the bound of %zu bytes a token", len, n, max);
        free(ids);
    }
}

static void test_max_token_bytes_bounds_the_count(void **state) {
    (void)state;
    tokenizer *t = spm_load((spm_opts){true, false});
    check_token_bound(t, 1);
    tokenizer_free(t);
    /* The small BPE vocabulary has no token for "a": it drops bytes, so no bound. */
    t = bpe_load("qwen2", true, false);
    if (!t) fail_msg("%s", err_get());
    assert_int_equal(tokenizer_max_token_bytes(t), SIZE_MAX);
    tokenizer_free(t);
    /* With every byte's token added the bound holds: "<|endoftext|>" (13
     * bytes) is the longest, and byte-level text can shrink by 4/3. */
    const char *texts[N_BPE + 256];
    char bytes[256][4];
    int32_t types[N_BPE + 256];
    int n = 0;
    for (int i = 0; i < N_BPE; i++) types[n] = TOK_TYPE_NORMAL, texts[n++] = k_bpe_tokens[i];
    types[T_EOT] = TOK_TYPE_CONTROL;
    for (int b = 0, next = 256; b < 256; b++) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        bytes[b][utf8_encode(bytes[b], printable ? (uint32_t)b : (uint32_t)next++)] = 0;
        bool known = false;
        for (int i = 0; i < N_BPE; i++) known |= !strcmp(k_bpe_tokens[i], bytes[b]);
        if (!known) types[n] = TOK_TYPE_NORMAL, texts[n++] = bytes[b];
    }
    image b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "qwen2");
    kv_strs(&b, "tokenizer.ggml.tokens", texts, n);
    kv_i32s(&b, "tokenizer.ggml.token_type", types, n);
    kv_strs(&b, "tokenizer.ggml.merges", k_bpe_merges, 9);
    t = image_load(&b);
    if (!t) fail_msg("%s", err_get());
    assert_int_equal(tokenizer_max_token_bytes(t), 18);
    check_token_bound(t, 2);
    tokenizer_free(t);
}

static void test_bpe_load_errors(void **state) {
    (void)state;
    assert_null(bpe_load("no-such-pre", true, false));
    assert_non_null(strstr(err_get(), "unknown pre-tokenizer type 'no-such-pre'"));
    assert_null(bpe_load("qwen2", false, false));
    assert_non_null(strstr(err_get(), "tokenizer.ggml.merges"));
    /* no BOS id in the metadata: GPT-2's default 11 ("he" here), as in llama.cpp */
    tokenizer *t = bpe_load("qwen2", true, true);
    if (!t) fail_msg("%s", err_get());
    EXPECT(t, "o", true, false, T_HE, T_O);
    tokenizer_free(t);
    tokenizer *d = bpe_load(NULL, true, false); /* no pre: llama.cpp's default chain */
    if (!d) fail_msg("%s", err_get());
    EXPECT(d, "hello", false, false, T_HELLO);
    tokenizer_free(d);
}

/* --- load errors --------------------------------------------------------- */

static void expect_load_error(image *b, const char *needle) {
    tokenizer *t = image_load(b);
    if (t) {
        tokenizer_free(t);
        fail_msg("loaded, but expected an error with '%s'", needle);
    }
    if (!strstr(err_get(), needle)) fail_msg("error '%s' lacks '%s'", err_get(), needle);
}

static void test_load_errors(void **state) {
    (void)state;
    const char *toks[] = {"a", "b", "a"};
    const float f[] = {0, 0, 0};
    const int32_t ty[] = {1, 1, 1};

    image b = image_new();
    kv_str(&b, "general.architecture", "llama");
    expect_load_error(&b, "tokenizer.ggml.model");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "t5");
    expect_load_error(&b, "unsupported tokenizer model 't5'");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "llama");
    expect_load_error(&b, "tokenizer.ggml.tokens is missing");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 3);
    expect_load_error(&b, "duplicate token in vocabulary: 'a' has ids 0 and 2");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    kv_f32s(&b, "tokenizer.ggml.token_type", f, 2);
    expect_load_error(&b, "tokenizer.ggml.token_type is not an array of int32");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    kv_f32s(&b, "tokenizer.ggml.scores", f, 1);
    expect_load_error(&b, "tokenizer.ggml.scores has 1 entries for 2 tokens");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    kv_i32s(&b, "tokenizer.ggml.token_type", ty, 2);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 7); /* out of range: the default 1 stays */
    kv_bool(&b, "tokenizer.ggml.add_eos_token", true); /* default EOS 2 is out of range */
    expect_load_error(&b, "add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");

    b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "qwen2");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    kv_strs(&b, "tokenizer.ggml.merges", toks, 0);
    kv_bool(&b, "tokenizer.ggml.add_bos_token", true); /* GPT-2's default BOS 11: none here */
    expect_load_error(&b, "add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
}

static void test_empty_tokens_are_renamed(void **state) {
    (void)state;
    const char *toks[] = {"a", "", "b"};
    image b = image_new();
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 3);
    tokenizer *t = image_load(&b);
    if (!t) fail_msg("%s", err_get());
    assert_string_equal(tokenizer_token_text(t, 1), "[EMPTY_1]");
    assert_int_equal(tokenizer_find(t, "b", 1), 2);
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_merges_highest_score_first_leftmost_on_ties),
        cmocka_unit_test(test_spm_space_prefix_and_escaped_spaces),
        cmocka_unit_test(test_spm_byte_fallback),
        cmocka_unit_test(test_spm_special_tokens),
        cmocka_unit_test(test_spm_control_tokens_stay_text_in_plain_ranges),
        cmocka_unit_test(test_spm_bos_eos_and_eog),
        cmocka_unit_test(test_spm_pieces),
        cmocka_unit_test(test_detok_holds_split_characters),
        cmocka_unit_test(test_detok_replaces_invalid_bytes_once_certain),
        cmocka_unit_test(test_detok_respects_cap),
        cmocka_unit_test(test_bpe_merges_by_rank),
        cmocka_unit_test(test_bpe_llama3_whole_words_and_digit_triples),
        cmocka_unit_test(test_bpe_load_errors),
        cmocka_unit_test(test_max_token_bytes_bounds_the_count),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_empty_tokens_are_renamed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
