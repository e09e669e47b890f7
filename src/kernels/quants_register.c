/* Placeholder until the quantized kernels land: registers nothing, so loading a
 * quantized tensor reports the type as unsupported. */
#include "kernels/quants.h"

void quants_register(wtype_traits *ref, wtype_traits *fast, bool use_avx2) {
    (void)ref;
    (void)fast;
    (void)use_avx2;
}
