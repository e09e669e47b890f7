/* Draft trees (engine/spec_tree.h): vLLM's list-of-paths notation parses
 * into breadth-first nodes with their parents, whatever order the paths are
 * listed in; the first N nodes are kept; malformed lists are refused with
 * the problem named; "auto" picks the most likely paths from the heads'
 * accuracies, which always form a tree; and --speculative-config takes the
 * key for Medusa only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/spec.h"
#include "engine/spec_tree.h"
#include "util/error.h"

#include <string.h>

static void expect_tree(const spec_tree *t, int n, const int *depth, const int *rank,
                        const int *parent) {
    assert_int_equal(t->n, n);
    for (int j = 0; j < n; j++) {
        if (t->depth[j] != depth[j] || t->rank[j] != rank[j] || t->parent[j] != parent[j])
            fail_msg("node %d: depth %d rank %d parent %d, want %d %d %d", j, t->depth[j],
                     t->rank[j], t->parent[j], depth[j], rank[j], parent[j]);
    }
}

static void test_paths_parse_breadth_first(void **state) {
    (void)state;
    spec_tree t;
    assert_int_equal(spec_tree_parse("[(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]", 16, &t), 0);
    expect_tree(&t, 6, (int[]){0, 0, 1, 1, 1, 2}, (int[]){0, 1, 0, 1, 0, 0},
                (int[]){-1, -1, 0, 0, 1, 2});
    /* Listed deepest first, no spaces, a trailing comma: the same order by depth. */
    assert_int_equal(spec_tree_parse(" [(1,0,),(0,1),(1,),(0,)] ", 16, &t), 0);
    expect_tree(&t, 4, (int[]){0, 0, 1, 1}, (int[]){1, 0, 0, 1}, (int[]){-1, -1, 0, 1});
    assert_int_equal(spec_tree_depth(&t), 2);
    /* The first three nodes of the first tree. */
    assert_int_equal(spec_tree_parse("[(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]", 3, &t), 0);
    expect_tree(&t, 3, (int[]){0, 0, 1}, (int[]){0, 1, 0}, (int[]){-1, -1, 0});
    assert_int_equal(spec_tree_parse("[(7,)]", 16, &t), 0);
    expect_tree(&t, 1, (int[]){0}, (int[]){7}, (int[]){-1});
}

static void expect_refused(const char *text, const char *message) {
    spec_tree t;
    assert_int_equal(spec_tree_parse(text, 16, &t), -1);
    if (!strstr(err_get(), message))
        fail_msg("%s: got \"%s\", want \"%s\"", text, err_get(), message);
}

static void test_bad_paths_are_refused(void **state) {
    (void)state;
    expect_refused("[(0,), (0,)]", "path (0,) is listed twice");
    expect_refused("[(0,), (1, 2)]", "path (1, 2) has no parent");
    expect_refused("[(8,)]", "rank 8 is out of range");
    expect_refused("[(0,)", "expected ',' or ']'");
    expect_refused("[", "expected '('");
    expect_refused("(0,)", "expected a list of paths");
    expect_refused("[()]", "an empty path");
    expect_refused("[]", "the list is empty");
    expect_refused("[(0,)] x", "text after");
    expect_refused("[(a,)]", "expected a candidate rank");
    expect_refused("[(0,) (1,)]", "expected ',' or ']'");
    /* 17 distinct paths: the top 8 candidates of the first head, then 9 below the best two. */
    expect_refused(
        "[(0,), (1,), (2,), (3,), (4,), (5,), (6,), (7,), (0, 0), (0, 1), (0, 2), (0, 3), (0, 4), "
        "(0, 5), (0, 6), (0, 7), (1, 0)]",
        "more than 16 paths");
}

/* Head 0 right 60% of the time at rank 0 and 5% at each of ranks 1-4, head 1
 * 40% and 5%: the paths' chances are (0) .6, (0, 0) .24, (1)..(4) .05,
 * (0, r) .03, so four nodes are (0), (1), (2) and (0, 0), ties going to
 * the shorter path and then the lower ranks. */
static void test_auto_tree_takes_the_likeliest_paths(void **state) {
    (void)state;
    const float top1[2] = {0.6f, 0.4f}, top5[2] = {0.8f, 0.6f};
    spec_tree t;
    spec_tree_auto(top1, top5, 2, 4, &t);
    expect_tree(&t, 4, (int[]){0, 0, 0, 1}, (int[]){0, 1, 2, 0}, (int[]){-1, -1, -1, 0});
    /* Strong heads: a chain first. */
    const float s1[4] = {0.9f, 0.9f, 0.9f, 0.9f}, s5[4] = {0.95f, 0.95f, 0.95f, 0.95f};
    spec_tree_auto(s1, s5, 4, 4, &t);
    expect_tree(&t, 4, (int[]){0, 1, 2, 3}, (int[]){0, 0, 0, 0}, (int[]){-1, 0, 1, 2});
    /* Whatever the accuracies, every node's parent comes before it and is one shallower. */
    const float r1[4] = {0.3f, 0.7f, 0.1f, 0.5f}, r5[4] = {0.9f, 0.8f, 0.6f, 0.5f};
    for (int n = 1; n <= SPEC_MAX_TOKENS; n++) {
        spec_tree_auto(r1, r5, 4, n, &t);
        assert_int_equal(t.n, n);
        for (int j = 0; j < n; j++) {
            assert_true(t.parent[j] < j);
            assert_int_equal(t.depth[j], t.parent[j] < 0 ? 0 : t.depth[t.parent[j]] + 1);
            assert_true(t.rank[j] >= 0 && t.rank[j] < 5);
        }
    }
}

static void test_config_takes_a_tree_for_medusa_only(void **state) {
    (void)state;
    spec_config c = spec_config_defaults();
    assert_int_equal(
        spec_config_parse_json(
            "{\"method\": \"medusa\", \"model\": \"h.gguf\", \"num_speculative_tokens\": "
            "6, \"speculative_token_tree\": \"auto\"}",
            &c),
        0);
    assert_string_equal(c.token_tree, "auto");
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"medusa\", \"model\": \"h.gguf\", "
                                            "\"speculative_token_tree\": \"[(0,), (0, 0)]\"}",
                                            &c),
                     0);
    c = spec_config_defaults();
    assert_int_equal(
        spec_config_parse_json("{\"method\": \"ngram\", \"speculative_token_tree\": \"auto\"}", &c),
        -1);
    assert_non_null(strstr(err_get(), "is for method \"medusa\""));
    assert_int_equal(spec_config_parse_json("{\"method\": \"medusa\", \"model\": \"h.gguf\", "
                                            "\"speculative_token_tree\": \"[(0,), (2, 0)]\"}",
                                            &c),
                     -1);
    assert_non_null(strstr(err_get(), "path (2, 0) has no parent"));
    assert_int_equal(spec_config_parse_json("{\"method\": \"medusa\", \"model\": \"h.gguf\", "
                                            "\"speculative_token_tree\": 3}",
                                            &c),
                     -1);
    assert_non_null(strstr(err_get(), "must be a string"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_parse_breadth_first),
        cmocka_unit_test(test_bad_paths_are_refused),
        cmocka_unit_test(test_auto_tree_takes_the_likeliest_paths),
        cmocka_unit_test(test_config_takes_a_tree_for_medusa_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
