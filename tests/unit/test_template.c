/* Chat templates: focused cases of the Jinja interpreter (whitespace control,
 * loops and their variables, namespaces, macros, filters, slices, tests,
 * raise_exception's message, errors with line numbers), the built-in
 * templates against their fixture files, the limits that stop runaway
 * templates, and a fuzz loop over mutated templates that must never crash.
 * The byte-for-byte comparison with Python jinja2 is
 * tests/integration/test_chat_template.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chat/template.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Renders `src` with the JSON context `ctx`; NULL on failure (err_get() says why). */
static char *render(const char *src, const char *ctx) {
    json_error_t jerr;
    json_t *j = json_loads(ctx ? ctx : "{}", 0, &jerr);
    assert_non_null(j);
    chat_template *t = chat_template_parse(src);
    char *out = t ? chat_template_render(t, j) : NULL;
    chat_template_free(t);
    json_decref(j);
    return out;
}

static void expect(const char *src, const char *ctx, const char *want) {
    char *got = render(src, ctx);
    if (!got) fail_msg("template %s failed: %s", src, err_get());
    if (strcmp(got, want) != 0) fail_msg("template %s\n  got  [%s]\n  want [%s]", src, got, want);
    free(got);
}

/* Expects failure with an error containing `part`. */
static void expect_error(const char *src, const char *ctx, const char *part) {
    char *got = render(src, ctx);
    if (got) fail_msg("template %s rendered [%s], expected an error", src, got);
    if (!strstr(err_get(), part))
        fail_msg("template %s: error [%s] lacks [%s]", src, err_get(), part);
}

static const char *MSGS =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"},"
    " {\"role\": \"user\", \"content\": \"  hi  \"}, {\"role\": \"assistant\", \"content\": "
    "\"yo\"}],"
    " \"xs\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"s\": \"Hello\", \"n\": 7, \"f\": 2.5,"
    " \"t\": true, \"none\": null, \"u\": \"\xc3\xa9\xf0\x9f\x91\x8dx\"}";

static void test_text_and_whitespace_control(void **state) {
    (void)state;
    expect("plain text", NULL, "plain text");
    expect("one trailing newline goes\n", NULL, "one trailing newline goes");
    expect("a\r\nb", NULL, "a\nb");
    expect("{% if true %}\nyes\n{% endif %}\nafter", NULL, "yes\nafter");
    expect("  {% if true %}\n    in\n  {% endif %}\nend", NULL, "    in\nend");
    expect("  {{ 1 }}", NULL, "  1");
    expect("a   {%- if true -%}   b   {%- endif -%}   c", NULL, "abc");
    expect("a \n {{- 1 -}} \n b", NULL, "a1b");
    expect("  {%+ if true %}x{% endif %}", NULL, "  x");
    expect("{% if true +%}\nx{% endif %}", NULL, "\nx");
    expect("a {# note #}\n  {# own line #}\nb", NULL, "a b");
    expect("{% raw %}{{ kept }}{% endraw %}", NULL, "{{ kept }}");
}

static void test_loops(void **state) {
    (void)state;
    expect("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
           "{{ loop.last }}{{ loop.length }};{% endfor %}",
           MSGS, "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
    expect("{% for x in [] %}x{% else %}empty{% endfor %}", NULL, "empty");
    expect("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}"
           "{% if not loop.last %},{% endif %}{% endfor %}",
           MSGS, "1user,2assistant");
    expect("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", MSGS, "b=2;a=1;");
    expect("{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}"
           "{% if x > 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
           NULL, "024");
    expect("{% for c in u %}[{{ c }}]{% endfor %}", MSGS, "[\xc3\xa9][\xf0\x9f\x91\x8d][x]");
    /* a set inside a loop does not survive the iteration, nor the loop */
    expect("{% set x = 'out' %}{% for i in xs %}{{ x }}{% set x = i %}{% endfor %}{{ x }}", MSGS,
           "outoutoutout");
    expect("{% for x in xs %}{{ loop.revindex }}{{ loop.previtem }}{% endfor %}", MSGS, "32311");
}

static void test_set_namespace_macros(void **state) {
    (void)state;
    expect("{% set a, b = 1, 'two' %}{{ a }}{{ b }}", NULL, "1two");
    expect("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
           "{% endfor %}{{ ns.n }}",
           MSGS, "3");
    expect("{% set blk %} in {{ 1 }} {% endset %}[{{ blk }}]", NULL, "[ in 1 ]");
    expect("{% macro g(name, p='!') %}Hi {{ name }}{{ p }}{% endmacro %}{{ g('A') }}{{ g('B', "
           "p='?') }}",
           NULL, "Hi A!Hi B?");
    expect("{% macro m() %}{{ late }}{% endmacro %}{% set late = 'L' %}{{ m() }}", NULL, "L");
    expect("{% filter upper %}up{% endfilter %}", NULL, "UP");
}

static void test_values_and_operators(void **state) {
    (void)state;
    expect("{{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1/3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }}",
           NULL, "1.0 1e+20 0.30000000000000004 0.3333333333333333 3 -4 2");
    expect("{{ true }} {{ none }} {{ [1, 'a', none] }} {{ {'k': 'v'} }} {{ (1,) }}", NULL,
           "True None [1, 'a', None] {'k': 'v'} (1,)");
    expect("{{ \"it's\" }} {{ [\"it's\"] }} {{ 'x' ~ 1 ~ none }} {{ 'ab' * 2 }}", NULL,
           "it's [\"it's\"] x1None abab");
    expect("{{ 2 ** 3 ** 2 }} {{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }}", NULL,
           "64 True True True");
    expect("{{ 'y' if t else 'n' }}{{ none or 'f' }}{{ t and 'a' }}", MSGS, "yfa");
    expect("{{ missing }}|{{ d.missing }}|{{ xs[10] }}", MSGS, "||");
}

static void test_access_and_slices(void **state) {
    (void)state;
    expect("{{ messages[1].role }} {{ messages[1]['content'] }} {{ xs.0 }} {{ d['a'] }}", MSGS,
           "user   hi   3 1");
    expect("{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ s[-3:] }} {{ s[::-1] }}",
           MSGS, "[1, 2] [3, 1] [2, 1, 3] [3, 2] llo olleH");
    expect("{{ u[1:] }} {{ u[-1] }} {{ u|length }}", MSGS, "\xf0\x9f\x91\x8dx x 3");
    expect("{{ messages[-1].content }} {{ d.items()|list }}", MSGS, "yo [('b', 2), ('a', 1)]");
}

static void test_filters(void **state) {
    (void)state;
    expect("[{{ '  x  '|trim }}][{{ s|upper }}][{{ s|lower }}][{{ 'a b-c'|title }}][{{ "
           "'hI'|capitalize }}]",
           MSGS, "[x][HELLO][hello][A B-C][Hi]");
    expect("{{ xs|length }} {{ xs|join(',') }} {{ xs|first }} {{ xs|last }} {{ xs|sort }} "
           "{{ xs|reverse|list }} {{ [1, 1, 2]|unique|list }} {{ xs|min }} {{ xs|max }}",
           MSGS, "3 3,1,2 3 2 [1, 2, 3] [2, 1, 3] [1, 2] 1 3");
    expect("{{ missing|default('d') }} {{ ''|default('e', true) }} {{ '4.7'|int }} {{ '2'|float }} "
           "{{ s|replace('l', 'L') }}",
           MSGS, "d e 4 2.0 HeLLo");
    expect("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}",
           MSGS, "['  hi  ']");
    expect("{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ d|dictsort }}", MSGS,
           "[3, 1] [2] [('a', 1), ('b', 2)]");
    expect("{{ d|tojson }} {{ u|tojson }} {{ 'a\"\\n'|tojson }} {{ [1, {'k': "
           "none}]|tojson(indent=2) }}",
           MSGS,
           "{\"b\": 2, \"a\": 1} \"\xc3\xa9\xf0\x9f\x91\x8dx\" \"a\\\"\\n\" [\n  1,\n  {\n    "
           "\"k\": null\n  }\n]");
    expect("{{ ' a b '.split() }} {{ 'a,b'.split(',') }} {{ s.startswith('He') }} {{ '  x "
           "'.strip() }}",
           MSGS, "['a', 'b'] ['a', 'b'] True x");
    expect("{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.keys()|list }}", MSGS, "1 0 ['b', 'a']");
}

static void test_tests(void **state) {
    (void)state;
    expect("{{ s is string }}{{ n is number }}{{ t is number }}{{ t is integer }}{{ d is mapping }}"
           "{{ xs is sequence }}{{ s is iterable }}{{ n is iterable }}{{ none is none }}",
           MSGS, "TrueTrueTrueFalseTrueTrueTrueFalseTrue");
    expect(
        "{{ missing is defined }}{{ missing is undefined }}{{ n is odd }}{{ 9 is divisibleby 3 }}"
        "{{ n is not none }}{{ 3 is gt 2 }}",
        MSGS, "FalseTrueTrueTrueTrueTrue");
}

static void test_raise_exception(void **state) {
    (void)state;
    char *out = render("{% if n > 5 %}{{ raise_exception('n is ' ~ n) }}{% endif %}", MSGS);
    assert_null(out);
    assert_string_equal(err_get(), "n is 7");
}

static void test_errors(void **state) {
    (void)state;
    /* parse errors name the line */
    expect_error("line one\n{% for x in xs %}", NULL, "line 2");
    expect_error("{{ 1 + }}", NULL, "line 1");
    expect_error("{% endif %}", NULL, "unknown tag");
    expect_error("{{ x|nosuchfilter }}", NULL, "no filter named 'nosuchfilter'");
    expect_error("{{ x is nosuchtest }}", NULL, "no test named");
    expect_error("{# open comment", NULL, "comment");
    expect_error("{{ 'unterminated }}", NULL, "unterminated string");
    expect_error("{% break %}", NULL, "outside loop");
    expect_error("{{ (1 }}", NULL, "line 1");
    expect_error("\xff\xfe", NULL, "UTF-8");
    /* jinja2 features no real template uses were deleted (tests/data/templates/README.md):
     * using one fails and names it */
    expect_error("{% with a = 1 %}{% endwith %}", NULL, "'with' tag is not supported");
    expect_error("{% call f() %}{% endcall %}", NULL, "'call' tag is not supported");
    expect_error("{{ s|wordcount }}", MSGS, "no filter named 'wordcount'");
    expect_error("{{ s is lower }}", MSGS, "no test named 'lower'");
    expect_error("{{ s.center(9) }}", MSGS, "no attribute 'center'");
    expect_error("{% for x in xs %}{{ loop.cycle(1, 2) }}{% endfor %}", MSGS, "'cycle'");
    /* runtime errors */
    expect_error("\n\n{{ missing.attr }}", NULL, "line 3: 'missing' is undefined");
    expect_error("{{ d.zz.yy }}", MSGS, "'dict object' has no attribute 'zz'");
    expect_error("{{ 'a' + 1 }}", NULL, "can only concatenate str");
    expect_error("{{ 1 / 0 }}", NULL, "division by zero");
    expect_error("{{ xs.append(1) }}", MSGS, "unsafe");
    expect_error("{% set x = 1 %}{% set x.y = 2 %}", NULL, "non-namespace");
    expect_error("{{ missing|tojson }}", NULL, "not JSON serializable");
    /* an unknown filter in an `if` that is never taken is fine, as in jinja2 */
    expect("{% if false %}{{ x|nosuchfilter }}{% endif %}ok", NULL, "ok");
    /* the context must be an object */
    chat_template *t = chat_template_parse("x");
    assert_non_null(t);
    json_t *arr = json_array();
    assert_null(chat_template_render(t, arr));
    json_decref(arr);
    chat_template_free(t);
}

static void test_limits(void **state) {
    (void)state;
    /* deep nesting is a parse error, not a stack overflow */
    size_t depth = 20000;
    char *deep = malloc(depth * 2 + 16);
    assert_non_null(deep);
    strcpy(deep, "{{ ");
    size_t k = 3;
    for (size_t i = 0; i < depth; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < depth; i++)
        deep[k++] = ')';
    strcpy(deep + k, " }}");
    expect_error(deep, NULL, "nested too deeply");
    k = 0;
    for (size_t i = 0; i < depth / 10; i++)
        k += (size_t)sprintf(deep + k, "{%% if 1 %%}");
    expect_error(deep, NULL, "nested too deeply");
    /* long left-nested chains count as nesting too */
    static const char *const links[] = {"|trim", ".a", "[0]", "()", " + 1", " and 1", " if 1",
                                        " ** 1", "{% elif 0 %}"};
    for (size_t c = 0; c < sizeof links / sizeof links[0]; c++) {
        k = (size_t)sprintf(deep, c == 8 ? "{%% if 0 %%}" : "{{ 1");
        for (int i = 0; i < 3000; i++) k += (size_t)sprintf(deep + k, "%s", links[c]);
        strcpy(deep + k, c == 8 ? "{% endif %}" : " }}");
        expect_error(deep, NULL, "nested too deeply");
    }
    free(deep);
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, "recursion");
    /* 10^10 iterations: stopped by the step budget or the memory budget, whichever first */
    assert_null(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                       "{% endfor %}",
                       NULL));
    assert_true(strstr(err_get(), "too long") || strstr(err_get(), "limit"));
    expect_error(
        "{% set r = range(3000) %}{% set ns = namespace(n=0) %}{% for i in range(100000) %}"
        "{% for j in r %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}",
        NULL, "too long");
    expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 NULL, "limit");
    expect_error("{{ 'x' * 1000000000000 }}", NULL, "too large");
    /* nothing repeated 10^10 times is nothing, at once (the fuzzer's 25 s timeout) */
    expect("{{ '' * 27777777777 }}|{{ 27777777777 * '' }}|{{ ([] * 27777777777)|length }}|{{ 'ab' * 2 }}", NULL,
           "||0|abab");
    expect_error("{{ range(1000000)|length }}", NULL, "Range too big");
}

/* --- built-in templates ------------------------------------------------------------------- */

static char *read_fixture(const char *name) {
    const char *dir = getenv("CLLM_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/%s.jinja", dir ? dir : "tests/data", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (set CLLM_TEST_DATA)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_builtin_matches_fixtures(void **state) {
    (void)state;
    static const struct {
        const char *arch;
        bool llama3;
        const char *fixture;
    } cases[] = {
        {"gemma3", false, "gemma3"}, {"llama", true, "llama3"}, {"llama", false, "mistral"},
        {"qwen2", false, "chatml"},  {"phi3", true, "chatml"},  {NULL, false, "chatml"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *want = read_fixture(cases[i].fixture);
        const char *got = chat_template_builtin(cases[i].arch, cases[i].llama3);
        assert_non_null(got);
        if (strcmp(got, want) != 0)
            fail_msg("built-in template for %s differs from tests/data/templates/%s.jinja "
                     "(regenerate with scripts/gen_chat_builtin.py)",
                     cases[i].arch ? cases[i].arch : "(null)", cases[i].fixture);
        free(want);
    }
}

static void test_builtin_render(void **state) {
    (void)state;
    const char *ctx =
        "{\"messages\": [{\"role\": \"user\", \"content\": \" Hi \"}],"
        " \"add_generation_prompt\": true, \"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\"}";
    char *g = render(chat_template_builtin("gemma3", false), ctx);
    assert_non_null(g);
    assert_string_equal(g, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
    free(g);
    char *c = render(chat_template_builtin("qwen2", false), ctx);
    assert_non_null(c);
    assert_string_equal(c, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                           "<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n");
    free(c);
    char *l = render(chat_template_builtin("llama", true), ctx);
    assert_non_null(l);
    assert_string_equal(l, "<bos><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(l);
    char *m = render(chat_template_builtin("llama", false), ctx);
    assert_non_null(m);
    assert_string_equal(m, "<bos>[INST]  Hi [/INST]");
    free(m);
    /* Gemma's alternation rule */
    assert_null(render(chat_template_builtin("gemma3", false),
                       "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
                       " {\"role\": \"user\", \"content\": \"b\"}]}"));
    assert_string_equal(err_get(),
                        "Conversation roles must alternate user/assistant/user/assistant/...");
}

/* --- request text marked (taint) ----------------------------------------------------------- */

/* Renders with the request's ranges marked, and returns the output with each
 * marked range between « and »; bos_token and eos_token are trusted. The
 * output itself must equal the unmarked rendering. */
static char *render_marked(const char *src, const char *ctx) {
    json_t *j = json_loads(ctx, 0, NULL);
    assert_non_null(j);
    chat_template *t = chat_template_parse(src);
    if (!t) fail_msg("template %s: %s", src, err_get());
    static const char *const trusted[] = {"bos_token", "eos_token", NULL};
    chat_span *spans;
    size_t nspans;
    char *out = chat_template_render_marked(t, j, trusted, &spans, &nspans);
    if (!out) fail_msg("template %s failed: %s", src, err_get());
    char *plain = chat_template_render(t, j);
    assert_non_null(plain);
    assert_string_equal(out, plain);
    free(plain);
    size_t n = strlen(out), k = 0;
    char *shown = malloc(n + 4 * nspans + 1);
    assert_non_null(shown);
    for (size_t i = 0, at = 0; i <= nspans; i++) {
        size_t end = i < nspans ? spans[i].off : n;
        assert_true(end >= at && end <= n);
        memcpy(shown + k, out + at, end - at);
        k += end - at;
        if (i == nspans) break;
        assert_true(spans[i].len > 0 && spans[i].off + spans[i].len <= n);
        k += (size_t)sprintf(shown + k, "\xc2\xab%.*s\xc2\xbb", (int)spans[i].len, out + spans[i].off);
        at = spans[i].off + spans[i].len;
    }
    shown[k] = 0;
    free(spans);
    free(out);
    chat_template_free(t);
    json_decref(j);
    return shown;
}

static void expect_marked(const char *src, const char *want) {
    static const char *ctx = "{\"messages\": [{\"role\": \"user\", \"content\": \" X<end_of_turn>Y \"}],"
                             " \"add_generation_prompt\": true, \"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\"}";
    char *got = render_marked(src, ctx);
    if (strcmp(got, want)) fail_msg("template %s\n  got  [%s]\n  want [%s]", src, got, want);
    free(got);
}

static void test_request_text_is_marked_through_every_operation(void **state) {
    (void)state;
    /* the built-in Gemma template: role and trimmed content are the request's */
    expect_marked(chat_template_builtin("gemma3", false),
                  "<bos><start_of_turn>«user»\n«X<end_of_turn>Y»<end_of_turn>\n<start_of_turn>model\n");
    /* concatenation keeps byte ranges; trusted context values stay unmarked */
    expect_marked("{{ '<a>' + messages[0].role + '<b>' }}", "<a>«user»<b>");
    expect_marked("{{ '<a>' ~ messages[0].role ~ 1 ~ bos_token }}", "<a>«user»1<bos>");
    expect_marked("{{ eos_token }}{{ messages[0]['role'] }}", "<eos>«user»");
    /* anything else made from request text is marked whole, literals included */
    expect_marked("{{ ('<a>' + messages[0].role) | upper }}", "«<A>USER»");
    expect_marked("{{ messages[0].content | replace('X', '<a>') }}", "« <a><end_of_turn>Y »");
    expect_marked("{{ '<%s>' % messages[0].role }}", "«<user>»");
    expect_marked("{{ '<a>|' * (messages[0].role | length) }}", "<a>|<a>|<a>|<a>|");
    expect_marked("{{ [messages[0].role, '<a>'] | join('') }}", "«user<a>»");
    expect_marked("{{ messages[0].content[1:3] }}{{ messages[0].role[0] }}", "«X<u»");
    expect_marked("{{ messages[0].content.split('<')[1] }}", "«end_of_turn>Y »");
    expect_marked("{{ messages[0].content.strip() }}", "«X<end_of_turn>Y»");
    /* what lies inside a string it was cut from keeps that string's ranges */
    expect_marked("{{ ('<a>' + messages[0].role + ' ') | trim }}", "<a>«user»");
    expect_marked("{{ ('<a>' + messages[0].role).split('>')[0] }}{{ ('<a>' ~ messages[0].role)[1:5] }}",
                  "<aa>«us»");
    expect_marked("{{ messages[0] | tojson }}", "«{\"role\": \"user\", \"content\": \" X<end_of_turn>Y \"}»");
    expect_marked("{% for c in messages[0].role %}{{ c }}-{% endfor %}", "«u»-«s»-«e»-«r»-");
    expect_marked("{% for m in messages | selectattr('role', 'eq', 'user') %}<a>{{ m.role }}{% endfor %}",
                  "<a>«user»");
    /* macros, set blocks and namespaces keep byte ranges; filter blocks mark whole */
    expect_marked("{% macro m(x) %}<a>{{ x }}</a>{% endmacro %}{{ m(messages[0].role) }}", "<a>«user»</a>");
    expect_marked("{% set s %}<a>{{ messages[0].role }}{% endset %}{{ s }}", "<a>«user»");
    expect_marked("{% set ns = namespace(t='') %}{% set ns.t = ns.t + '<a>' + messages[0].role %}{{ ns.t }}",
                  "<a>«user»");
    expect_marked("{% filter upper %}<a>{{ messages[0].role }}{% endfilter %}", "«<A>USER»");
    /* choosing a template literal by request text leaves the literal the template's */
    expect_marked("{{ {'user': '<u>'}.get(messages[0].role) }}{{ {'user': '<v>'}[messages[0].role] }}", "<u><v>");
    expect_marked("{% if messages[0].role == 'user' %}<w>{% endif %}", "<w>");
    /* the plain render is unchanged, and the trust switch is off until set */
    chat_template *t = chat_template_parse("x");
    assert_false(chat_template_trusts_content(t));
    chat_template_set_trust_content(t, true);
    assert_true(chat_template_trusts_content(t));
    chat_template_free(t);
}

/* --- fuzzing ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void test_fuzz_mutations(void **state) {
    (void)state;
    static const char *const pieces[] = {
        "{{",
        "}}",
        "{%",
        "%}",
        "{#",
        "#}",
        "-",
        "+",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "'",
        "\"",
        "\\",
        "|",
        ".",
        ",",
        ":",
        "=",
        " if ",
        " else ",
        " for ",
        " in ",
        " endfor ",
        " endif ",
        " set ",
        " macro ",
        " endmacro ",
        " call ",
        " loop ",
        "loop.index",
        "ns.x",
        "namespace(",
        "messages",
        "xs[::-1]",
        "|tojson",
        "|trim",
        " is defined",
        " not ",
        "**",
        "//",
        "~",
        "raise_exception(",
        "range(",
        "\xc3\xa9",
        "\xf0\x9f\x91\x8d",
        "\n",
        " ",
        "0",
        "1e9",
        "{% raw %}",
        "{% endraw %}",
        "kwargs",
        "varargs",
        "|map(attribute='x')",
        "[1:2]",
    };
    const char *seeds[] = {
        chat_template_builtin("gemma3", false),
        chat_template_builtin("llama", true),
        chat_template_builtin("llama", false),
        chat_template_builtin("qwen2", false),
        "{% set ns = namespace(a=[]) %}{% for m in messages if m.role %}{% set ns.a = ns.a + [m] %}"
        "{{ loop.index }}{{ m.content|trim|upper }}{% endfor %}{{ ns.a|length }}{{ xs[1:]|tojson }}"
        "{% macro f(a, b=2) %}{{ a ~ b ~ varargs }}{{ kwargs if kwargs is defined }}{% endmacro "
        "%}"
        "{{ f(1, 2, 3) }}{% filter upper %}x{% endfilter %}{{ d|dictsort }}{{ s.split('l') }}",
    };
    json_error_t jerr;
    json_t *ctx = json_loads(MSGS, 0, &jerr);
    assert_non_null(ctx);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    int rendered = 0;
    for (int iter = 0; iter < 3000; iter++) {
        const char *seed = seeds[rnd() % (sizeof seeds / sizeof seeds[0])];
        size_t n = strlen(seed);
        if (n > 30000) n = 30000;
        memcpy(buf, seed, n);
        int edits = 1 + (int)(rnd() % 6);
        for (int e = 0; e < edits; e++) {
            size_t pos = n ? rnd() % (n + 1) : 0;
            switch (rnd() % 5) {
            case 0: /* delete a span */
                if (n) {
                    size_t len = 1 + rnd() % 8;
                    if (pos + len > n) len = n - pos;
                    memmove(buf + pos, buf + pos + len, n - pos - len);
                    n -= len;
                }
                break;
            case 1: /* flip a byte */
                if (pos < n) buf[pos] = (char)(rnd() & 0xFF ? rnd() & 0xFF : 'x');
                break;
            case 2: /* truncate */
                n = pos;
                break;
            default: { /* insert a piece of syntax */
                const char *p = pieces[rnd() % (sizeof pieces / sizeof pieces[0])];
                size_t len = strlen(p);
                if (n + len < 60000) {
                    memmove(buf + pos + len, buf + pos, n - pos);
                    memcpy(buf + pos, p, len);
                    n += len;
                }
            }
            }
        }
        buf[n] = 0;
        for (size_t i = 0; i < n; i++)
            if (!buf[i]) buf[i] = ' ';
        chat_template *t = chat_template_parse(buf);
        if (!t) {
            assert_true(strlen(err_get()) > 0);
            continue;
        }
        char *out = chat_template_render(t, ctx);
        if (out) rendered++;
        /* marking request text never changes the rendering; its ranges are in order and inside it */
        chat_span *spans;
        size_t nspans;
        char *marked = chat_template_render_marked(t, ctx, NULL, &spans, &nspans);
        assert_true((out == NULL) == (marked == NULL));
        if (out) assert_string_equal(out, marked);
        for (size_t i = 0; marked && i < nspans; i++) {
            assert_true(spans[i].len > 0 && spans[i].off + spans[i].len <= strlen(marked));
            if (i) assert_true(spans[i].off > spans[i - 1].off + spans[i - 1].len);
        }
        free(spans);
        free(marked);
        free(out);
        chat_template_free(t);
    }
    /* some mutants must survive, or the fuzzing exercised only the parser's errors */
    assert_true(rendered > 100);
    free(buf);
    json_decref(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_and_whitespace_control),
        cmocka_unit_test(test_loops),
        cmocka_unit_test(test_set_namespace_macros),
        cmocka_unit_test(test_values_and_operators),
        cmocka_unit_test(test_access_and_slices),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_tests),
        cmocka_unit_test(test_raise_exception),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_builtin_matches_fixtures),
        cmocka_unit_test(test_builtin_render),
        cmocka_unit_test(test_request_text_is_marked_through_every_operation),
        cmocka_unit_test(test_fuzz_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
