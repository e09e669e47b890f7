/* The bottom layer's basics that every other layer relies on: strict UTF-8
 * (what is a character, how long, which code point, where a bad run ends) and
 * memory sizes as every command reads them, growable arrays, and reading a
 * whole file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/error.h"
#include "util/file.h"
#include "util/lru_map.h"
#include "util/mem_size.h"
#include "util/unicode.h"
#include "util/utf8.h"
#include "util/array.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- utf8 ---- */

static void test_utf8_accepts_well_formed_text(void **state) {
    (void)state;
    assert_true(utf8_valid("", 0));
    assert_true(utf8_valid("h\xc3\xa9 \xe4\xb8\x96 \xf0\x9f\x99\x82", 12));
    assert_true(utf8_valid("\xc2\x80", 2));         /* U+0080, the first 2-byte */
    assert_true(utf8_valid("\xed\x9f\xbf", 3));     /* U+D7FF, just below the surrogates */
    assert_true(utf8_valid("\xee\x80\x80", 3));     /* U+E000, just above them */
    assert_true(utf8_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF, the last code point */
    assert_true(utf8_valid("a\0b", 3));             /* NUL is a character */
}

static void test_utf8_rejects_overlongs_surrogates_and_beyond_10ffff(void **state) {
    (void)state;
    assert_false(utf8_valid("\xc3", 1));                 /* truncated */
    assert_false(utf8_valid("\xe4\xb8", 2));             /* truncated */
    assert_false(utf8_valid("\xc0\xaf", 2));             /* overlong '/' */
    assert_false(utf8_valid("\xc1\xbf", 2));             /* overlong */
    assert_false(utf8_valid("\xe0\x9f\xbf", 3));         /* overlong U+07FF */
    assert_false(utf8_valid("\xf0\x8f\xbf\xbf", 4));     /* overlong U+FFFF */
    assert_false(utf8_valid("\xed\xa0\x80", 3));         /* U+D800 */
    assert_false(utf8_valid("\xed\xbf\xbf", 3));         /* U+DFFF */
    assert_false(utf8_valid("\xf4\x90\x80\x80", 4));     /* U+110000 */
    assert_false(utf8_valid("\xf5\x80\x80\x80", 4));     /* lead byte past F4 */
    assert_false(utf8_valid("\xff", 1));
    assert_false(utf8_valid("\x80", 1));                 /* a lone continuation */
    assert_false(utf8_valid("\xe4\x41\x96", 3));         /* continuation missing */
    assert_false(utf8_valid("ok\xf0\x9f\x99", 5));       /* cut at the end */
}

static void test_utf8_seq_len_is_the_character_or_zero(void **state) {
    (void)state;
    assert_int_equal(utf8_seq_len("a", 1), 1);
    assert_int_equal(utf8_seq_len("\xc3\xa9x", 3), 2);
    assert_int_equal(utf8_seq_len("\xe4\xb8\x96", 3), 3);
    assert_int_equal(utf8_seq_len("\xf0\x9f\x99\x82", 4), 4);
    assert_int_equal(utf8_seq_len("\xf0\x9f\x99\x82", 3), 0); /* cut short */
    assert_int_equal(utf8_seq_len("\xed\xa0\x80", 3), 0);
    assert_int_equal(utf8_seq_len("", 0), 0);
}

/* The detokenizer's needs: complete (> 0), wait for more (0), or how many
 * bytes one U+FFFD replaces (-k), as Python's decode(errors="replace"). */
static void test_utf8_scan_tells_complete_unfinished_and_maximal_invalid_subpart(void **state) {
    (void)state;
    assert_int_equal(utf8_scan("\xe4\xb8\x96", 3), 3);
    assert_int_equal(utf8_scan("\xe4\xb8", 2), 0);         /* a valid prefix */
    assert_int_equal(utf8_scan("\xf0\x9f", 2), 0);
    assert_int_equal(utf8_scan("", 0), 0);
    assert_int_equal(utf8_scan("\xff", 1), -1);
    assert_int_equal(utf8_scan("\x80\x80", 2), -1);
    assert_int_equal(utf8_scan("\xe4\x41", 2), -1);        /* lead alone, then 'A' */
    assert_int_equal(utf8_scan("\xe4\xb8\x41", 3), -2);    /* two bytes, then 'A' */
    assert_int_equal(utf8_scan("\xf0\x9f\x99\x41", 4), -3);
    assert_int_equal(utf8_scan("\xed\xa0\x80", 3), -1);    /* surrogate: A0 is not allowed after ED */
    assert_int_equal(utf8_scan("\xe0\x80\x80", 3), -1);    /* overlong: 80 is not allowed after E0 */
    assert_int_equal(utf8_scan("\xf4\x90\x80\x80", 4), -1);
}

static void test_utf8_decode_gives_the_code_point(void **state) {
    (void)state;
    uint32_t cp = 7;
    assert_int_equal(utf8_decode("A", 1, &cp), 1);
    assert_int_equal(cp, 0x41);
    assert_int_equal(utf8_decode("\xc3\xa9", 2, &cp), 2);
    assert_int_equal(cp, 0xE9);
    assert_int_equal(utf8_decode("\xe4\xb8\x96", 3, &cp), 3);
    assert_int_equal(cp, 0x4E16);
    assert_int_equal(utf8_decode("\xf4\x8f\xbf\xbf", 4, &cp), 4);
    assert_int_equal(cp, 0x10FFFF);
    cp = 7;
    assert_int_equal(utf8_decode("\xc0\xaf", 2, &cp), 0);
    assert_int_equal(cp, 7); /* untouched */
}

static void test_utf8_encode_round_trips_every_length(void **state) {
    (void)state;
    static const uint32_t cps[] = {0, 0x41, 0x7F, 0x80, 0x7FF, 0x800, 0xFFFD, 0xFFFF, 0x10000, 0x1F642, 0x10FFFF};
    static const int lens[] = {1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4};
    for (size_t i = 0; i < sizeof cps / sizeof *cps; i++) {
        char out[4];
        uint32_t back = 0;
        assert_int_equal(utf8_encode(out, cps[i]), lens[i]);
        assert_int_equal(utf8_decode(out, (size_t)lens[i], &back), lens[i]);
        assert_int_equal(back, cps[i]);
    }
    char out[4];
    assert_int_equal(utf8_encode(out, 0x143), 2);
    assert_memory_equal(out, "\xc5\x83", 2);
}

static void test_utf8_count_counts_code_points(void **state) {
    (void)state;
    assert_int_equal(utf8_count("", 0), 0);
    assert_int_equal(utf8_count("abc", 3), 3);
    assert_int_equal(utf8_count("h\xc3\xa9 \xe4\xb8\x96 \xf0\x9f\x99\x82", 12), 6);
}

/* ---- mem_size ---- */

static size_t size_of(const char *s, size_t avail) {
    size_t n = 0;
    assert_int_equal(mem_size_parse(s, avail, &n), 0);
    return n;
}

static void test_mem_size_k_is_1024_except_in_kb_mb_gb_tb(void **state) {
    (void)state;
    assert_true(size_of("2GiB", 0) == (size_t)2 << 30);
    assert_true(size_of("512MiB", 0) == (size_t)512 << 20);
    assert_true(size_of("1.5G", 0) == (size_t)3 << 29);
    assert_true(size_of("100MB", 0) == 100000000);
    assert_true(size_of("4096", 0) == 4096);
    assert_true(size_of("4096B", 0) == 4096);
    assert_true(size_of("1k", 0) == 1024);
    assert_true(size_of("1Ki", 0) == 1024);
    assert_true(size_of("1KB", 0) == 1000);
    assert_true(size_of("2T", 0) == (size_t)2 << 40);
    assert_true(size_of("1tb", 0) == (size_t)1000000000000);
}

/* What `serve` took and `generate` refused before they shared one parser. */
static void test_mem_size_units_are_case_insensitive_with_optional_i_and_b(void **state) {
    (void)state;
    assert_true(size_of("512m", 0) == (size_t)512 << 20);
    assert_true(size_of("1g", 0) == (size_t)1 << 30);
    assert_true(size_of("1gib", 0) == (size_t)1 << 30);
    assert_true(size_of("1GiB", 0) == (size_t)1 << 30);
    assert_true(size_of("1gi", 0) == (size_t)1 << 30);
    assert_true(size_of("1GIB", 0) == (size_t)1 << 30);
    assert_true(size_of("1.5GB", 0) == (size_t)1500000000);
    assert_true(size_of("1.5gb", 0) == (size_t)1500000000);
}

static void test_mem_size_fraction_is_a_share_of_what_is_available(void **state) {
    (void)state;
    assert_true(size_of("0.5", 1000) == 500);
    assert_true(size_of("1.0", 1000) == 1000);
    assert_true(size_of(".25", 1000) == 250);
    size_t n;
    assert_int_equal(mem_size_parse("0.5", 0, &n), -1); /* unknown free memory */
    assert_non_null(strstr(err_get(), "unknown"));
    assert_int_equal(mem_size_parse("1.5", 1000, &n), -1); /* fraction over 1 */
    assert_non_null(strstr(err_get(), "(0, 1]"));
    assert_int_equal(mem_size_parse("1.5", 0, &n), -1);
}

static void test_mem_size_errors_name_the_value(void **state) {
    (void)state;
    size_t n;
    static const char *const bad[] = {"-1GiB", "12 parsecs", "", " 1G", "+1G", "0", "inf", "lots", "10.5B",
                                      "1.5", "1gg", "1e30T", "0.0001K", "G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err_clear();
        assert_int_equal(mem_size_parse(bad[i], 0, &n), -1);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        if (!strstr(err_get(), quoted)) fail_msg("the error for %s does not name it: %s", quoted, err_get());
    }
    mem_size_parse("12 parsecs", 0, &n);
    assert_non_null(strstr(err_get(), "unknown unit ' parsecs'"));
}

/* ---- vec ---- */

static void test_vec_reserve_doubles_and_keeps_the_items(void **state) {
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    assert_int_equal(array_reserve((void **)&v, &cap, 0, sizeof *v), 0);
    assert_null(v); /* nothing needed, nothing allocated */
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(array_reserve((void **)&v, &cap, (size_t)i + 1, sizeof *v), 0);
        assert_true(cap >= (size_t)i + 1);
        v[i] = i * 3;
    }
    assert_int_equal(cap, 1024); /* 16, 32, ... : a power of two from 16 */
    for (int i = 0; i < 1000; i++) assert_int_equal(v[i], i * 3);
    const int *before = v;
    assert_int_equal(array_reserve((void **)&v, &cap, 1000, sizeof *v), 0);
    assert_ptr_equal(v, before); /* enough room: untouched */
    assert_int_equal(array_reserve((void **)&v, &cap, 5000, sizeof *v), 0);
    assert_int_equal(cap, 8192);
    free(v);
}

static void test_vec_reserve_refuses_an_overflowing_size_and_keeps_the_array(void **state) {
    (void)state;
    double *v = NULL;
    size_t cap = 0;
    assert_int_equal(array_reserve((void **)&v, &cap, 4, sizeof *v), 0);
    v[3] = 1.5;
    const size_t huge = SIZE_MAX / sizeof *v + 1;
    assert_int_equal(array_reserve((void **)&v, &cap, huge, sizeof *v), -1);
    char want[64];
    snprintf(want, sizeof want, "%zu items of 8 bytes", huge);
    if (!strstr(err_get(), want)) fail_msg("'%s' does not say '%s'", err_get(), want);
    assert_int_equal(cap, 16);
    assert_true(v[3] == 1.5);
    free(v);
}

/* ---- file ---- */

static void test_file_read_all_gives_the_bytes_nul_terminated(void **state) {
    (void)state;
    char path[] = "/tmp/cllm_test_util_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    for (int i = 0; i < 5000; i++) fputs("0123456789", f); /* past one read's chunk */
    fputc(0, f);                                         /* a NUL inside is kept */
    fclose(f);
    size_t len = 0;
    char *text = file_read_all(path, &len);
    assert_non_null(text);
    assert_int_equal(len, 50001);
    assert_memory_equal(text + 49990, "0123456789", 10);
    assert_int_equal(text[50000], 0);
    assert_int_equal(text[len], 0);
    free(text);
    f = fopen(path, "wb"); /* empty: an empty string */
    fclose(f);
    text = file_read_all(path, &len);
    assert_non_null(text);
    assert_int_equal(len, 0);
    assert_string_equal(text, "");
    free(text);
    remove(path);
    assert_null(file_read_all(path, NULL));
    char want[128];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    assert_string_equal(err_get(), want);
}

/* ---- lru_map ---- */

typedef struct {
    lru_node node;
    char key[16];
} lru_item;

static lru_item *lru_item_new(const char *key) {
    lru_item *it = calloc(1, sizeof *it);
    snprintf(it->key, sizeof it->key, "%s", key);
    it->node.key = it->key;
    it->node.key_len = strlen(it->key);
    return it;
}

/* The keys from newest to oldest, space-separated. */
static void lru_order(const lru_map *m, char *out, size_t cap) {
    out[0] = 0;
    for (const lru_node *n = m->newest; n; n = n->older) {
        strncat(out, (const char *)n->key, cap - strlen(out) - 1);
        if (n->older) strncat(out, " ", cap - strlen(out) - 1);
        assert_ptr_equal(n->older ? n->older->newer : m->oldest, n);
    }
}

static void test_lru_map_evicts_the_least_recently_used(void **state) {
    (void)state;
    lru_map m;
    assert_int_equal(lru_map_init(&m, 3), 0);
    char order[64];
    assert_null(lru_map_insert(&m, &lru_item_new("a")->node));
    assert_null(lru_map_insert(&m, &lru_item_new("b")->node));
    assert_null(lru_map_insert(&m, &lru_item_new("c")->node));
    lru_order(&m, order, sizeof order);
    assert_string_equal(order, "c b a");
    lru_node *a = lru_map_get(&m, "a", 1); /* a hit makes "a" the newest */
    assert_non_null(a);
    assert_string_equal(((lru_item *)a)->key, "a");
    lru_order(&m, order, sizeof order);
    assert_string_equal(order, "a c b");
    lru_node *out = lru_map_insert(&m, &lru_item_new("d")->node); /* over capacity: "b" leaves */
    assert_non_null(out);
    assert_string_equal(((lru_item *)out)->key, "b");
    free(out);
    assert_null(lru_map_get(&m, "b", 1));
    assert_int_equal(m.n, 3);
    lru_order(&m, order, sizeof order);
    assert_string_equal(order, "d a c");
    for (lru_node *n = m.newest, *older; n; n = older) {
        older = n->older;
        free(n);
    }
    lru_map_destroy(&m);
}

static void test_lru_map_compares_whole_keys(void **state) {
    (void)state;
    lru_map m;
    assert_int_equal(lru_map_init(&m, 100), 0);
    char k[16];
    for (int i = 0; i < 100; i++) { /* more keys than buckets/2: chains form */
        snprintf(k, sizeof k, "k%d", i);
        assert_null(lru_map_insert(&m, &lru_item_new(k)->node));
    }
    assert_null(lru_map_get(&m, "k", 1));    /* a prefix is another key */
    assert_null(lru_map_get(&m, "k100", 4)); /* so is a longer one */
    assert_null(lru_map_get(&m, "k5\0", 3)); /* bytes, not a C string: the NUL counts */
    assert_non_null(lru_map_get(&m, "k50", 2)); /* "k5": the length decides */
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "k%d", i);
        const lru_node *n = lru_map_get(&m, k, strlen(k));
        assert_non_null(n);
        assert_string_equal(((const lru_item *)n)->key, k);
    }
    for (lru_node *n = m.newest, *older; n; n = older) {
        older = n->older;
        free(n);
    }
    lru_map_destroy(&m);
}

/* ---- unicode (values from Python 3.11's str methods and unicodedata) ---- */

static void test_unicode_case_maps_may_expand(void **state) {
    (void)state;
    uint32_t m[UNICODE_MAX_CASE_MAP];
    assert_int_equal(unicode_to_lower(0x130, m), 2); /* "İ".lower() == "i\u0307" */
    assert_int_equal(m[0], 'i');
    assert_int_equal(m[1], 0x307);
    assert_int_equal(unicode_to_upper(0xDF, m), 2); /* "ß".upper() == "SS" */
    assert_int_equal(m[0], 'S');
    assert_int_equal(m[1], 'S');
    assert_int_equal(unicode_to_upper(0x390, m), 3); /* "ΐ".upper() == "Ϊ́" */
    assert_int_equal(m[0], 0x399);
    assert_int_equal(m[1], 0x308);
    assert_int_equal(m[2], 0x301);
    assert_int_equal(unicode_to_title(0x1C6, m), 1); /* "ǆ".title() == "ǅ", not "Ǆ" */
    assert_int_equal(m[0], 0x1C5);
    assert_int_equal(unicode_to_upper(0x1C6, m), 1);
    assert_int_equal(m[0], 0x1C4);
    assert_int_equal(unicode_to_lower(0x3A3, m), 1); /* "Σ" alone: σ (final sigma needs context) */
    assert_int_equal(m[0], 0x3C3);
    assert_int_equal(unicode_to_lower(0x10400, m), 1); /* Deseret, beyond the BMP */
    assert_int_equal(m[0], 0x10428);
    assert_int_equal(unicode_to_lower(0x4E2D, m), 1); /* uncased: itself */
    assert_int_equal(m[0], 0x4E2D);
    assert_int_equal(unicode_to_lower('Q', m), 1);
    assert_int_equal(m[0], 'q');
}

static void test_unicode_nfd_decomposes_fully_and_computes_hangul(void **state) {
    (void)state;
    uint32_t d[UNICODE_MAX_DECOMPOSITION];
    assert_int_equal(unicode_nfd(0xE9, d), 2); /* é */
    assert_int_equal(d[0], 'e');
    assert_int_equal(d[1], 0x301);
    assert_int_equal(unicode_nfd(0x1E69, d), 3); /* ṩ: s, dot below, dot above (canonical order) */
    assert_int_equal(d[0], 's');
    assert_int_equal(d[1], 0x323);
    assert_int_equal(d[2], 0x307);
    assert_int_equal(unicode_nfd(0xD55C, d), 3); /* 한: ᄒ ᅡ ᆫ */
    assert_int_equal(d[0], 0x1112);
    assert_int_equal(d[1], 0x1161);
    assert_int_equal(d[2], 0x11AB);
    assert_int_equal(unicode_nfd(0xAC00, d), 2); /* 가: no final consonant */
    assert_int_equal(d[0], 0x1100);
    assert_int_equal(d[1], 0x1161);
    assert_int_equal(unicode_nfd('a', d), 1);
    assert_int_equal(d[0], 'a');
}

static void test_unicode_classes_follow_python(void **state) {
    (void)state;
    assert_true(unicode_is_printable(' '));
    assert_false(unicode_is_printable(0xA0));   /* no-break space: a separator */
    assert_false(unicode_is_printable(0x2028)); /* line separator */
    assert_false(unicode_is_printable(0x200B)); /* zero width space: Cf */
    assert_false(unicode_is_printable(0x378));  /* unassigned */
    assert_true(unicode_is_printable(0xE9));
    assert_true(unicode_is_other(0xAD));        /* soft hyphen: Cf */
    assert_true(unicode_is_other(0xE000));      /* private use */
    assert_false(unicode_is_other('a'));
    assert_true(unicode_is_punct(0x3001));      /* 、 */
    assert_true(unicode_is_punct(0xBF));        /* ¿ */
    assert_false(unicode_is_punct('$'));        /* Sc, not P */
    assert_true(unicode_is_nonspacing_mark(0x301));
    assert_false(unicode_is_nonspacing_mark(0x903)); /* Mc */
    assert_true(unicode_is_space(0x3000));
    assert_true(unicode_is_space(0x1C));  /* Python counts the file separators */
    assert_false(unicode_is_space(0x200B));
    assert_true(unicode_is_cased(0x1C5));
    assert_false(unicode_is_cased(0x4E2D));
    assert_true(unicode_is_case_ignorable('\''));
    assert_true(unicode_is_case_ignorable(0x301));
    assert_false(unicode_is_case_ignorable('a'));
    assert_int_equal(unicode_decimal_value(0x663), 3); /* ٣ */
    assert_int_equal(unicode_decimal_value(0xFF19), 9); /* fullwidth 9 */
    assert_int_equal(unicode_decimal_value(0xB2), -1);  /* ² is a digit, not a decimal */
    assert_int_equal(unicode_decimal_value('x'), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_accepts_well_formed_text),
        cmocka_unit_test(test_utf8_rejects_overlongs_surrogates_and_beyond_10ffff),
        cmocka_unit_test(test_utf8_seq_len_is_the_character_or_zero),
        cmocka_unit_test(test_utf8_scan_tells_complete_unfinished_and_maximal_invalid_subpart),
        cmocka_unit_test(test_utf8_decode_gives_the_code_point),
        cmocka_unit_test(test_utf8_encode_round_trips_every_length),
        cmocka_unit_test(test_utf8_count_counts_code_points),
        cmocka_unit_test(test_mem_size_k_is_1024_except_in_kb_mb_gb_tb),
        cmocka_unit_test(test_mem_size_units_are_case_insensitive_with_optional_i_and_b),
        cmocka_unit_test(test_mem_size_fraction_is_a_share_of_what_is_available),
        cmocka_unit_test(test_mem_size_errors_name_the_value),
        cmocka_unit_test(test_vec_reserve_doubles_and_keeps_the_items),
        cmocka_unit_test(test_vec_reserve_refuses_an_overflowing_size_and_keeps_the_array),
        cmocka_unit_test(test_file_read_all_gives_the_bytes_nul_terminated),
        cmocka_unit_test(test_lru_map_evicts_the_least_recently_used),
        cmocka_unit_test(test_unicode_case_maps_may_expand),
        cmocka_unit_test(test_unicode_nfd_decomposes_fully_and_computes_hangul),
        cmocka_unit_test(test_unicode_classes_follow_python),
        cmocka_unit_test(test_lru_map_compares_whole_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
