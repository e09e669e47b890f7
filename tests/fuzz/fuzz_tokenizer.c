/* libFuzzer harness: fuzz bytes (any bytes, invalid UTF-8 included)
 * encoded and decoded by a small SentencePiece vocabulary (with and without
 * the space prefix), a small byte-level BPE one (GPT-2, Llama 3 or Qwen2
 * pre-tokenizer) or a small WordPiece one (BERT's normalizer: Unicode
 * decomposition, case mapping, CJK and punctuation splits), chosen by the
 * first byte, which also picks add_special,
 * parse_special and plain ranges for tokenizer_encode_guarded. The ids are
 * decoded piece by piece and through the streaming detokenizer. */
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer.h"

#include "fuzz_common.h"

enum { N_VOCABS = 6 };

static const tokenizer *vocab(int which) {
    static tokenizer *cache[N_VOCABS];
    if (!cache[which]) {
        static const char *const k_pre[] = {"gpt2", "llama3", "qwen2"};
        cache[which] = which < 2   ? fuzz_spm_tokenizer(which == 1)
                       : which < 5 ? fuzz_bpe_tokenizer(k_pre[which - 2])
                                   : fuzz_wordpiece_tokenizer();
    }
    return cache[which];
}

static void decode(const tokenizer *t, const int32_t *ids, int n, bool special) {
    char piece[256], out[DETOK_MAX_OUT(sizeof piece)];
    detok_state st = {0};
    for (int i = 0; i < n; i++) {
        const int len = tokenizer_token_to_piece(t, ids[i], special, piece, sizeof piece);
        if (len < 0) __builtin_trap(); /* the encoder made an id out of range */
        detok_push(t, &st, ids[i], special, out, sizeof out);
    }
    detok_flush(&st, out, sizeof out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    const tokenizer *t = vocab(flags % N_VOCABS);
    const bool add_special = flags & 8, parse_special = flags & 16;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    int32_t *ids = NULL;
    int n;
    if (flags & 32) {
        /* The middle third of the text is request text: no control tokens there. */
        tok_range plain = {len / 3, len / 3};
        n = tokenizer_encode_guarded(t, text, len, add_special, parse_special, &plain, 1, &ids);
    } else {
        n = tokenizer_encode(t, text, len, add_special, parse_special, &ids);
    }
    if (n < 0) return 0;
    decode(t, ids, n, flags & 64);
    free(ids);
    return 0;
}
