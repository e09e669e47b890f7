/* libFuzzer harness: a safetensors image from fuzz bytes, parsed in memory
 * (st_open_memory) and every tensor's data touched at both ends. A malformed
 * header or offsets must give an error message, never a crash or a leak. */
#include "format/safetensors.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_set *s = st_open_memory(data, size, "fuzz.safetensors");
    if (!s) return 0;
    volatile unsigned sink = 0;
    for (int64_t i = 0; i < st_n_tensors(s); i++) {
        const st_tensor *t = st_tensor_at(s, i);
        if (t->nbytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        if (st_find(s, t->name) != t) __builtin_trap();
        sink += (unsigned)st_dtype_size(t->dtype);
    }
    sink += (unsigned)st_data_bytes(s);
    st_close(s);
    (void)sink;
    return 0;
}
