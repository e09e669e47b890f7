/* See spec.h. The JSON keys and their meaning are vLLM's; the defaults for
 * the n-gram lengths differ (vLLM: 5 and 5) because shorter matches find
 * drafts more often and the adaptive K keeps failed ones cheap. */
#include "engine/spec.h"

#include "engine/spec_tree.h"
#include "util/error.h"

#include <jansson.h>
#include <string.h>

spec_config spec_config_defaults(void) {
    return (spec_config){.method = SPEC_NONE,
                         .num_speculative_tokens = 4,
                         .prompt_lookup_min = 2,
                         .prompt_lookup_max = 5,
                         .disable_by_batch_size = 8};
}

int spec_config_check(const spec_config *c) {
    if (c->method == SPEC_NONE) return 0;
    if (c->num_speculative_tokens < 1 || c->num_speculative_tokens > SPEC_MAX_TOKENS)
        return err_set("num_speculative_tokens must be in 1..%d, got %d", SPEC_MAX_TOKENS,
                       c->num_speculative_tokens);
    if (c->prompt_lookup_min < 1 || c->prompt_lookup_min > 64)
        return err_set("prompt_lookup_min must be in 1..64, got %d", c->prompt_lookup_min);
    if (c->prompt_lookup_max < 1 || c->prompt_lookup_max > 64)
        return err_set("prompt_lookup_max must be in 1..64, got %d", c->prompt_lookup_max);
    if (c->prompt_lookup_min > c->prompt_lookup_max)
        return err_set("prompt_lookup_min (%d) must not exceed prompt_lookup_max (%d)",
                       c->prompt_lookup_min, c->prompt_lookup_max);
    if (c->method == SPEC_DRAFT_MODEL && !c->model[0])
        return err_set("method \"draft_model\" needs \"model\": the draft model's path");
    if (c->method == SPEC_MEDUSA && !c->model[0])
        return err_set("method \"medusa\" needs \"model\": the heads' file (made by `cllm medusa train`)");
    if (c->method == SPEC_NGRAM && c->model[0])
        return err_set("\"model\" is for methods \"draft_model\", \"medusa\" and \"layer_skip\" (an exit "
                       "adapter), not \"ngram\"");
    if (c->method == SPEC_LAYER_SKIP && c->model[0] && c->draft_vocab[0])
        return err_set("an exit adapter (\"model\") carries its own draft vocabulary: drop \"draft_vocab\" "
                       "(\"draft_vocab_size\" takes the first N of it)");
    if (c->draft_layers < 0 || c->draft_layers > 4096)
        return err_set("draft_layers must be in 1..the target's layers, got %d", c->draft_layers);
    if (c->draft_layers && c->method != SPEC_LAYER_SKIP)
        return err_set("\"draft_layers\" is for method \"layer_skip\"");
    const bool slices = c->method == SPEC_LAYER_SKIP || c->method == SPEC_DRAFT_MODEL;
    if ((c->draft_vocab[0] && !slices) || (c->draft_vocab_size && !slices && c->method != SPEC_MEDUSA))
        return err_set("\"draft_vocab\" is for methods \"layer_skip\" and \"draft_model\" (Medusa heads carry their "
                       "own; \"draft_vocab_size\" takes the first N of theirs)");
    if (c->draft_vocab_size < 0 || c->draft_vocab_size > (1 << 24))
        return err_set("draft_vocab_size must be positive, got %d", c->draft_vocab_size);
    if (c->draft_vocab_size && !c->draft_vocab[0] && c->method != SPEC_MEDUSA &&
        !(c->method == SPEC_LAYER_SKIP && c->model[0]))
        return err_set("\"draft_vocab_size\" needs \"draft_vocab\": the file of frequency-ranked tokens");
    if (c->token_tree[0] && c->method != SPEC_MEDUSA)
        return err_set("\"speculative_token_tree\" is for method \"medusa\"");
    spec_tree tree;
    if (c->token_tree[0] && strcmp(c->token_tree, "auto") &&
        spec_tree_parse(c->token_tree, c->num_speculative_tokens, &tree))
        return -1;
    if (!(c->draft_p_min >= 0 && c->draft_p_min <= 1))
        return err_set("draft_p_min must be in [0, 1], got %g", c->draft_p_min);
    if (c->draft_p_min > 0 && (c->method == SPEC_NGRAM || (c->method == SPEC_MEDUSA && c->token_tree[0])))
        return err_set("\"draft_p_min\" is for drafts with probabilities: methods \"draft_model\", \"layer_skip\" "
                       "and \"medusa\" without a speculative_token_tree");
    if (c->prompt_lookup_num_tokens < 0 || c->prompt_lookup_num_tokens > SPEC_MAX_TOKENS)
        return err_set("prompt_lookup_num_tokens must be in 1..%d, got %d", SPEC_MAX_TOKENS,
                       c->prompt_lookup_num_tokens);
    if (c->prompt_lookup_num_tokens && c->method == SPEC_NGRAM)
        return err_set("\"prompt_lookup_num_tokens\" is for a method that tries n-gram lookup first (\"draft_model\", "
                       "\"layer_skip\", \"medusa\"); method \"ngram\" drafts num_speculative_tokens");
    if (c->disable_by_batch_size < 1)
        return err_set("disable_by_batch_size must be at least 1, got %d",
                       c->disable_by_batch_size);
    return 0;
}

static int parse_method(json_t *v, spec_config *c) {
    const char *m = json_string_value(v);
    if (!m) return err_set("\"method\" must be a string");
    if (!strcmp(m, "ngram")) {
        c->method = SPEC_NGRAM;
        return 0;
    }
    if (!strcmp(m, "draft_model")) {
        c->method = SPEC_DRAFT_MODEL;
        return 0;
    }
    if (!strcmp(m, "layer_skip")) {
        c->method = SPEC_LAYER_SKIP;
        return 0;
    }
    if (!strcmp(m, "medusa")) {
        c->method = SPEC_MEDUSA;
        return 0;
    }
    return err_set("unknown method \"%s\" (known: \"ngram\", \"draft_model\", \"layer_skip\", \"medusa\")", m);
}

static int parse_path(const char *key, json_t *v, char *out, size_t cap) {
    const char *path = json_string_value(v);
    if (!path || !*path) return err_set("\"%s\" must be a path (of the draft model, the Medusa heads, or the draft "
                                        "vocabulary's file)", key);
    if (strlen(path) >= cap) return err_set("\"%s\": the path is too long", key);
    memcpy(out, path, strlen(path) + 1);
    return 0;
}

/* The tree as text: "auto", or the list of paths as a string (vLLM's form). */
static int parse_tree_text(json_t *v, char *out, size_t cap) {
    const char *text = json_string_value(v);
    if (!text || !*text)
        return err_set("\"speculative_token_tree\" must be a string: \"auto\" or a list of paths like "
                       "\"[(0,), (1,), (0, 0)]\"");
    if (strlen(text) >= cap) return err_set("\"speculative_token_tree\" is too long");
    memcpy(out, text, strlen(text) + 1);
    return 0;
}

static int parse_int(const char *key, json_t *v, int *out) {
    if (!json_is_integer(v)) return err_set("\"%s\" must be an integer", key);
    const json_int_t x = json_integer_value(v);
    if (x < -1000000 || x > 1000000)
        return err_set("\"%s\" is out of range (%lld)", key, (long long)x);
    *out = (int)x;
    return 0;
}

static int parse_prob(const char *key, json_t *v, float *out) {
    if (!json_is_number(v)) return err_set("\"%s\" must be a number in [0, 1]", key);
    *out = (float)json_number_value(v);
    return 0;
}

int spec_config_parse_json(const char *text, spec_config *c) {
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root) return err_set("malformed JSON at column %d: %s", jerr.column, jerr.text);
    spec_config out = *c;
    bool has_min = false, has_max = false, has_lookup_k = false, has_model = false;
    int rc = 0;
    if (!json_is_object(root))
        rc = err_set("expected a JSON object, like {\"method\": \"ngram\", ...}");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (rc) break;
        if (!strcmp(key, "method"))
            rc = parse_method(v, &out);
        else if (!strcmp(key, "num_speculative_tokens"))
            rc = parse_int(key, v, &out.num_speculative_tokens);
        else if (!strcmp(key, "prompt_lookup_min"))
            rc = parse_int(key, v, &out.prompt_lookup_min), has_min = true;
        else if (!strcmp(key, "prompt_lookup_max"))
            rc = parse_int(key, v, &out.prompt_lookup_max), has_max = true;
        else if (!strcmp(key, "prompt_lookup_num_tokens"))
            rc = parse_int(key, v, &out.prompt_lookup_num_tokens), has_lookup_k = true;
        else if (!strcmp(key, "disable_by_batch_size"))
            rc = parse_int(key, v, &out.disable_by_batch_size), out.batch_given = true;
        else if (!strcmp(key, "draft_layers"))
            rc = parse_int(key, v, &out.draft_layers);
        else if (!strcmp(key, "model"))
            rc = parse_path(key, v, out.model, sizeof out.model), has_model = true;
        else if (!strcmp(key, "draft_vocab"))
            rc = parse_path(key, v, out.draft_vocab, sizeof out.draft_vocab);
        else if (!strcmp(key, "draft_vocab_size"))
            rc = parse_int(key, v, &out.draft_vocab_size);
        else if (!strcmp(key, "speculative_token_tree"))
            rc = parse_tree_text(v, out.token_tree, sizeof out.token_tree);
        else if (!strcmp(key, "draft_p_min"))
            rc = parse_prob(key, v, &out.draft_p_min), out.p_min_given = true;
        else
            rc = err_set("unknown key \"%s\" (known: method, model, draft_layers, draft_vocab, draft_vocab_size, "
                         "num_speculative_tokens, speculative_token_tree, draft_p_min, prompt_lookup_min, "
                         "prompt_lookup_max, prompt_lookup_num_tokens, disable_by_batch_size)",
                         key);
    }
    json_decref(root);
    if (rc) return -1;
    if (out.method == SPEC_NONE && has_model) out.method = SPEC_DRAFT_MODEL; /* as vLLM */
    if (out.method == SPEC_NONE)
        return err_set("\"method\" is required (\"ngram\" or \"draft_model\" with \"model\")");
    /* One bound given alone moves the other's default when they would cross. */
    if (has_min && !has_max && out.prompt_lookup_max < out.prompt_lookup_min)
        out.prompt_lookup_max = out.prompt_lookup_min;
    if (has_max && !has_min && out.prompt_lookup_min > out.prompt_lookup_max)
        out.prompt_lookup_min = out.prompt_lookup_max;
    out.lookup_first = (has_min || has_max || has_lookup_k || out.lookup_first) && out.method != SPEC_NGRAM;
    spec_config_finish(&out);
    if (spec_config_check(&out)) return -1;
    *c = out;
    return 0;
}

void spec_config_finish(spec_config *c) {
    if (!c->p_min_given)
        c->draft_p_min = c->method == SPEC_NGRAM || (c->method == SPEC_MEDUSA && c->token_tree[0]) ? 0
                         : c->method == SPEC_MEDUSA ? SPEC_MEDUSA_P_MIN : SPEC_DRAFT_RUNNER_P_MIN;
    if (c->batch_given) return;
    c->disable_by_batch_size = c->method == SPEC_DRAFT_MODEL || c->method == SPEC_LAYER_SKIP
                                   ? SPEC_DRAFT_RUNNER_BATCH
                                   : spec_config_defaults().disable_by_batch_size;
}

int spec_lookup_max(const spec_config *c) {
    return c->prompt_lookup_num_tokens ? c->prompt_lookup_num_tokens : c->num_speculative_tokens;
}

int spec_max_draft(const spec_config *c) {
    const int lookup = c->lookup_first ? spec_lookup_max(c) : 0;
    return lookup > c->num_speculative_tokens ? lookup : c->num_speculative_tokens;
}

int spec_backoff_steps(int n_misses) {
    if (n_misses <= 0) return 0;
    return (1 << (n_misses < 6 ? n_misses : 6)) - 1;
}

int spec_next_k(int k_cur, int k_max, int n_draft, int n_accepted) {
    int k = n_accepted >= n_draft ? 2 * (k_cur > n_draft ? k_cur : n_draft) : n_accepted + 1;
    if (k > k_max) k = k_max;
    return k < 1 ? 1 : k;
}
