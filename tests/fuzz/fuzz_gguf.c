/* libFuzzer harness: a GGUF image from fuzz bytes, parsed in memory
 * (gguf_open_memory), every metadata value and tensor visited, and the
 * image taken as a vocabulary (tokenizer_from_gguf) and used when it loads.
 * A malformed image must give an error message, never a crash or a leak. */
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#include "fuzz_common.h"

/* Reads every element of an array value, nested arrays too, so a length
 * that the reader let through unchecked shows up as an out-of-bounds read. */
static double visit_value(const gguf_value *v, int depth) {
    double sum = 0;
    if (v->type == GGUF_TYPE_STRING) return v->s.len ? (double)(unsigned char)v->s.ptr[v->s.len - 1] : 0;
    if (v->type != GGUF_TYPE_ARRAY || depth > 4) return 0;
    for (uint64_t i = 0; i < v->arr.n && i < 4096; i++) {
        if (v->arr.type == GGUF_TYPE_STRING) {
            gguf_str s = v->arr.strs[i];
            if (s.len) sum += (unsigned char)s.ptr[s.len - 1];
        } else if (v->arr.type == GGUF_TYPE_ARRAY) {
            sum += visit_value(&v->arr.items[i], depth + 1);
        } else {
            sum += gguf_arr_num(v, i);
        }
    }
    return sum;
}

static void use_tokenizer(const tokenizer *t) {
    fuzz_use_tokenizer(t);
    char piece[64];
    const int32_t n_vocab = tokenizer_n_vocab(t);
    for (int32_t id = 0; id < n_vocab && id < 512; id++) {
        tokenizer_token_to_piece(t, id, true, piece, sizeof piece);
        tokenizer_is_eog(t, id);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_ctx *g = gguf_open_memory(data, size, "fuzz.gguf");
    if (!g) return 0;
    volatile double sink = 0;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) sink += visit_value(&gguf_kv_at(g, i)->value, 0);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor_info *ti = gguf_tensor_at(g, i);
        /* The first and last byte of the data the reader vouched for. */
        if (ti->nbytes) sink += ((const uint8_t *)ti->data)[0] + ((const uint8_t *)ti->data)[ti->nbytes - 1];
        gguf_find_tensor(g, ti->name);
    }
    uint32_t u32;
    float f32;
    gguf_str s;
    gguf_get_u32(g, "general.alignment", &u32);
    gguf_get_f32(g, "llama.rope.freq_base", &f32);
    gguf_get_str(g, "general.architecture", &s);
    tokenizer *t = tokenizer_from_gguf(g);
    if (t) {
        use_tokenizer(t);
        tokenizer_free(t);
    }
    gguf_close(g);
    (void)sink;
    return 0;
}
