/* The option-table machinery of cli_options.h: matching argv words to rows
 * (canonical names, aliases, --no- forms, --NAME=VALUE), storing values with
 * bound checks and messages that name the flag as typed, positional words,
 * required options, the generated --help and --print-config. */
#include "cli/cli_options.h"

#include "cli/cli_common.h"
#include "util/error.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A row as one command sees it: the section's overrides applied, and the
 * address of its setting in this command's settings. */
typedef struct {
    const cli_option *row;
    const char *help;
    const char *default_text;
    double min, max;
    bool required;
    void *setting;
} option_view;

#define HELP_WIDTH 100
#define HELP_COLUMN 32

/* Whether `word` (len bytes) is one of the space-separated words of list. */
static bool word_in(const char *list, const char *word, size_t len) {
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        const size_t n = strcspn(p, " ");
        if (n && n == len && !strncmp(p, word, len)) return true;
        p += n;
    }
    return false;
}

static bool section_takes(const cli_section *s, const cli_option *o) {
    return !s->only || word_in(s->only, o->name, strlen(o->name));
}

static option_view view_of(const cli_section *s, const cli_option *o, void *settings) {
    option_view v = {.row = o, .help = o->help, .default_text = o->default_text, .min = o->min, .max = o->max,
                     .required = o->required, .setting = (char *)settings + s->offset + o->offset};
    for (const cli_override *ov = s->overrides; ov && ov->name; ov++) {
        if (strcmp(ov->name, o->name)) continue;
        if (ov->help) v.help = ov->help;
        if (ov->default_text) v.default_text = ov->default_text;
        if (ov->min < ov->max) v.min = ov->min, v.max = ov->max;
        v.required |= ov->required;
    }
    return v;
}

/* Every option the command takes, in --help order; malloc'd. */
static option_view *views_of(const cli_command *cmd, void *settings, int *n_out) {
    int n = 0;
    for (const cli_section *s = cmd->sections; s->group; s++)
        for (const cli_option *o = s->group->options; o->name; o++) n += section_takes(s, o);
    option_view *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    n = 0;
    for (const cli_section *s = cmd->sections; s->group; s++)
        for (const cli_option *o = s->group->options; o->name; o++)
            if (section_takes(s, o)) v[n++] = view_of(s, o, settings);
    *n_out = n;
    return v;
}

/* A section naming an option its group lacks is a mistake in the table, not
 * in the command line; say so plainly rather than ignore it. */
static int check_tables(const cli_command *cmd) {
    for (const cli_section *s = cmd->sections; s->group; s++) {
        for (const char *p = s->only; p && *p;) {
            while (*p == ' ') p++;
            const size_t len = strcspn(p, " ");
            bool found = len == 0;
            for (const cli_option *o = s->group->options; o->name && !found; o++)
                found = strlen(o->name) == len && !strncmp(o->name, p, len);
            if (!found) return err_set("'%.*s' is not one of the %s", (int)len, p, s->group->title);
            p += len;
        }
        for (const cli_override *ov = s->overrides; ov && ov->name; ov++) {
            bool taken = false;
            for (const cli_option *o = s->group->options; o->name && !taken; o++)
                taken = !strcmp(o->name, ov->name) && section_takes(s, o);
            if (!taken) return err_set("an override names %s, which this command's %s lack", ov->name, s->group->title);
        }
    }
    return 0;
}

/* ---- values ---- */

static long long_bound(double x) {
    if (x <= (double)LONG_MIN) return LONG_MIN;
    if (x >= (double)LONG_MAX) return LONG_MAX;
    return (long)x;
}

/* "1GiB", "512MiB", "3000 bytes": a size as a person would write it. */
static void format_bytes(size_t bytes, char *buf, size_t n) {
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 4; i++) {
        const size_t unit = (size_t)1 << (10 * (4 - i));
        if (bytes >= unit && bytes % unit == 0) {
            snprintf(buf, n, "%zu%s", bytes / unit, units[i]);
            return;
        }
    }
    snprintf(buf, n, "%zu bytes", bytes);
}

static void choices_text(const char *const *choices, const char *sep, const char *last_sep, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; choices[i] && len < n; i++) {
        const char *s = i == 0 ? "" : choices[i + 1] ? sep : last_sep;
        len += (size_t)snprintf(buf + len, n - len, "%s%s", s, choices[i]);
    }
}

static int set_enum(const char *cmd, const option_view *v, const char *flag, const char *value) {
    for (int i = 0; v->row->choices[i]; i++)
        if (!strcmp(value, v->row->choices[i])) {
            *(int *)v->setting = i;
            return 0;
        }
    char expected[256];
    choices_text(v->row->choices, ", ", " or ", expected, sizeof expected);
    fprintf(stderr, "cllm %s: %s expects %s, got '%s'\n", cmd, flag, expected, value);
    return -1;
}

static int set_memory(const char *cmd, const option_view *v, const char *flag, const char *value) {
    size_t bytes;
    if (arg_memory(cmd, flag, value, &bytes)) return -1;
    if (v->max > 0 && (double)bytes > v->max) {
        char most[32];
        format_bytes((size_t)v->max, most, sizeof most);
        fprintf(stderr, "cllm %s: %s expects at most %s, got '%s'\n", cmd, flag, most, value);
        return -1;
    }
    *(size_t *)v->setting = bytes;
    return 0;
}

static int add_to_list(cli_list *l, const char *value) {
    const char **grown = realloc(l->items, (size_t)(l->n + 1) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "cllm: out of memory\n");
        return -1;
    }
    l->items = grown;
    l->items[l->n++] = value;
    return 0;
}

/* Stores one occurrence of an option. `flag` is the spelling the user typed. */
static int set_value(const char *cmd, const option_view *v, const char *flag, const char *value, bool negated) {
    switch (v->row->kind) {
    case CLI_FLAG: *(bool *)v->setting = true; return 0;
    case CLI_FLAG_OFF: *(bool *)v->setting = false; return 0;
    case CLI_BOOL: *(bool *)v->setting = !negated; return 0;
    case CLI_INT: return arg_int(cmd, flag, value, long_bound(v->min), long_bound(v->max), (long *)v->setting);
    case CLI_FLOAT: return arg_float(cmd, flag, value, v->min, v->max, (double *)v->setting);
    case CLI_STRING: *(const char **)v->setting = value; return 0;
    case CLI_MEMORY: return set_memory(cmd, v, flag, value);
    case CLI_ENUM: return set_enum(cmd, v, flag, value);
    case CLI_LIST: return add_to_list((cli_list *)v->setting, value);
    case CLI_CUSTOM:
        if (v->row->parse(flag, value, v->setting) == 0) return 0;
        fprintf(stderr, "cllm %s: %s\n", cmd, err_get());
        return -1;
    }
    return -1;
}

static bool takes_value(const cli_option *o) {
    return o->kind != CLI_FLAG && o->kind != CLI_FLAG_OFF && o->kind != CLI_BOOL;
}

/* ---- a setting as JSON (--print-config) and as text (--help's default) ---- */

/* NULL when the setting holds no value yet (the command decides it later). */
static json_t *value_json(const option_view *v) {
    const void *s = v->setting;
    switch (v->row->kind) {
    case CLI_FLAG: case CLI_FLAG_OFF: case CLI_BOOL: return json_boolean(*(const bool *)s);
    case CLI_INT: return *(const long *)s < v->min ? NULL : json_integer(*(const long *)s);
    case CLI_FLOAT: return *(const double *)s < v->min ? NULL : json_real(*(const double *)s);
    case CLI_STRING:
        if (!*(const char *const *)s) return NULL;
        return v->row->secret ? json_string("(set)") : json_string(*(const char *const *)s);
    case CLI_MEMORY: return *(const size_t *)s ? json_integer((json_int_t) * (const size_t *)s) : NULL;
    case CLI_ENUM: return json_string(v->row->choices[*(const int *)s]);
    case CLI_LIST: {
        const cli_list *l = s;
        json_t *a = json_array();
        for (int i = 0; i < l->n; i++) json_array_append_new(a, json_string(l->items[i]));
        return a;
    }
    case CLI_CUSTOM: {
        json_t *j = v->row->to_json(s);
        if (json_is_null(j)) json_decref(j), j = NULL;
        return j;
    }
    }
    return NULL;
}

static bool is_set(const option_view *v) {
    json_t *j = value_json(v);
    const bool set = j && !(json_is_array(j) && json_array_size(j) == 0);
    json_decref(j);
    return set;
}

/* The "(default ...)" of --help, or "" when there is nothing to say. */
static void default_of(const option_view *v, char *buf, size_t n) {
    buf[0] = 0;
    const cli_kind k = v->row->kind;
    if (v->default_text) {
        snprintf(buf, n, " (default: %s)", v->default_text);
        return;
    }
    if (k == CLI_FLAG || k == CLI_FLAG_OFF || k == CLI_LIST || (k == CLI_STRING && v->row->secret)) return;
    if (k == CLI_BOOL) {
        snprintf(buf, n, " (default: %s)", *(const bool *)v->setting ? "on" : "off");
        return;
    }
    if (k == CLI_MEMORY) {
        char bytes[32];
        if (!*(const size_t *)v->setting) return;
        format_bytes(*(const size_t *)v->setting, bytes, sizeof bytes);
        snprintf(buf, n, " (default: %s)", bytes);
        return;
    }
    json_t *j = value_json(v);
    if (json_is_string(j)) snprintf(buf, n, " (default: %s)", json_string_value(j));
    else if (json_is_integer(j)) snprintf(buf, n, " (default: %lld)", (long long)json_integer_value(j));
    else if (json_is_real(j)) snprintf(buf, n, " (default: %g)", json_real_value(j));
    json_decref(j);
}

/* ---- --help ---- */

/* Prints text from column `col` (the cursor is there), wrapping at
 * HELP_WIDTH and indenting continuation lines to `indent`. */
static void print_wrapped(FILE *f, const char *text, int col, int indent) {
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        const size_t word = strcspn(p, " \n");
        if (col > indent && col + 1 + (int)word > HELP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)word, p);
        col += (int)word;
        p += word;
        if (*p == '\n') {
            fprintf(f, "\n%*s", indent, "");
            col = indent, p++;
        }
    }
    fputc('\n', f);
}

/* "-c, --max-model-len N": short aliases first, then the canonical name. */
static int print_flags(FILE *f, const option_view *v) {
    const cli_option *o = v->row;
    int col = fprintf(f, "  ");
    for (const char *p = o->aliases; p && *p;) {
        while (*p == ' ') p++;
        const size_t n = strcspn(p, " ");
        if (n == 2 && p[0] == '-' && p[1] != '-') col += fprintf(f, "%.*s, ", (int)n, p);
        p += n;
    }
    col += fprintf(f, "%s", o->name);
    if (o->kind == CLI_BOOL) col += fprintf(f, ", --no-%s", o->name + 2);
    if (takes_value(o)) {
        char choices[256];
        const char *metavar = o->metavar;
        if (!metavar && o->choices) {
            choices_text(o->choices, "|", "|", choices, sizeof choices);
            metavar = choices;
        }
        col += fprintf(f, " %s", metavar ? metavar : "VALUE");
    }
    return col;
}

/* "also --ctx-size, --ctx" for the long aliases, or "" */
static void long_aliases(const cli_option *o, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (const char *p = o->aliases; p && *p && len < n;) {
        while (*p == ' ') p++;
        const size_t w = strcspn(p, " ");
        if (w > 2) len += (size_t)snprintf(buf + len, n - len, "%s%.*s", len ? ", " : "also ", (int)w, p);
        p += w;
    }
}

static void print_option(FILE *f, const option_view *v) {
    int col = print_flags(f, v);
    if (col > HELP_COLUMN - 2) {
        fprintf(f, "\n%*s", HELP_COLUMN, "");
    } else {
        fprintf(f, "%*s", HELP_COLUMN - col, "");
    }
    char text[1024], def[256], also[256];
    default_of(v, def, sizeof def);
    snprintf(text, sizeof text, "%s%s", v->help ? v->help : "", def);
    print_wrapped(f, text, HELP_COLUMN, HELP_COLUMN);
    long_aliases(v->row, also, sizeof also);
    if (also[0]) fprintf(f, "%*s(%s)\n", HELP_COLUMN, "", also);
}

void cli_print_help(const cli_command *cmd, const void *settings, FILE *f) {
    fprintf(f, "usage: cllm %s %s\n", cmd->name, cmd->synopsis);
    if (cmd->about) {
        fputc('\n', f);
        print_wrapped(f, cmd->about, 0, 0);
    }
    const char *heading = NULL;
    for (const cli_section *s = cmd->sections; s->group; s++) {
        const char *title = s->title ? s->title : s->group->title;
        for (const cli_option *o = s->group->options; o->name; o++) {
            if (!section_takes(s, o)) continue;
            if (!heading || strcmp(heading, title)) fprintf(f, "\n%s:\n", title);
            heading = title;
            const option_view v = view_of(s, o, (void *)settings);
            print_option(f, &v);
        }
    }
    fprintf(f, "\ncommon options:\n"
               "  -h, --help                    show this help and exit\n"
               "  --print-config                print the settings this command line gives, as JSON, and exit\n"
               "                                without running (defaults included; \"null\": decided later)\n");
    if (cmd->notes) {
        fputc('\n', f);
        print_wrapped(f, cmd->notes, 0, 0);
    }
}

/* ---- --print-config ---- */

static void key_of(const char *name_or_metavar, char *buf, size_t n) {
    while (*name_or_metavar == '-') name_or_metavar++;
    size_t i = 0;
    for (; name_or_metavar[i] && i + 1 < n; i++) buf[i] = (char)tolower((unsigned char)name_or_metavar[i]);
    buf[i] = 0;
}

static void print_config(const cli_command *cmd, const option_view *views, int n, const void *settings) {
    json_t *doc = json_pack("{s:s}", "command", cmd->name);
    char key[64];
    for (const cli_positional *p = cmd->positionals; p && p->metavar; p++) {
        bool an_option = false;
        for (int i = 0; i < n && !an_option; i++) an_option = views[i].setting == (const char *)settings + p->offset;
        if (an_option) continue;
        key_of(p->metavar, key, sizeof key);
        const void *s = (const char *)settings + p->offset;
        json_t *j;
        if (p->list) {
            const cli_list *l = s;
            j = json_array();
            for (int i = 0; i < l->n; i++) json_array_append_new(j, json_string(l->items[i]));
        } else {
            const char *str = *(const char *const *)s;
            j = str ? json_string(str) : json_null();
        }
        json_object_set_new(doc, key, j);
    }
    for (int i = 0; i < n; i++) {
        key_of(views[i].row->name, key, sizeof key);
        json_t *j = value_json(&views[i]);
        json_object_set_new(doc, key, j ? j : json_null());
    }
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (text) puts(text);
    free(text);
    json_decref(doc);
}

/* ---- parsing ---- */

int cli_usage_error(const cli_command *cmd, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cllm %s: %s (usage: cllm %s %s; see --help)\n", cmd->name, msg, cmd->name, cmd->synopsis);
    return -1;
}

/* The view `flag` names (negated: it was the --no- form), or NULL. */
static const option_view *find_option(const option_view *views, int n, const char *flag, bool *negated) {
    const size_t len = strlen(flag);
    *negated = false;
    for (int i = 0; i < n; i++) {
        const cli_option *o = views[i].row;
        if (!strcmp(flag, o->name) || word_in(o->aliases, flag, len)) return &views[i];
        if (o->kind == CLI_BOOL && !strncmp(flag, "--no-", 5) && !strcmp(flag + 5, o->name + 2)) {
            *negated = true;
            return &views[i];
        }
    }
    return NULL;
}

static int take_positional(const cli_command *cmd, void *settings, const char *word) {
    for (const cli_positional *p = cmd->positionals; p && p->metavar; p++) {
        void *s = (char *)settings + p->offset;
        if (p->list) return add_to_list(s, word);
        if (*(const char **)s) continue;
        *(const char **)s = word;
        return 0;
    }
    fprintf(stderr, "cllm %s: unexpected argument '%s' (see cllm %s --help)\n", cmd->name, word, cmd->name);
    return -1;
}

static int check_required(const cli_command *cmd, const option_view *views, int n, const void *settings) {
    for (const cli_positional *p = cmd->positionals; p && p->metavar; p++) {
        const void *s = (const char *)settings + p->offset;
        const bool missing = p->list ? ((const cli_list *)s)->n == 0 : !*(const char *const *)s;
        if (p->required && missing) return cli_usage_error(cmd, "missing %s", p->metavar);
    }
    for (int i = 0; i < n; i++)
        if (views[i].required && !is_set(&views[i]))
            return cli_usage_error(cmd, "missing %s", views[i].row->name);
    return 0;
}

/* Handles argv[*i], advancing *i past a value it takes. Returns 0, 1 for
 * --help (answered), 2 for --print-config (noted), -1 on an error. */
static int parse_word(const cli_command *cmd, const option_view *views, int n, int argc, char **argv, int *i,
                      void *settings) {
    const char *word = argv[*i];
    if (!strcmp(word, "-h") || !strcmp(word, "--help")) {
        cli_print_help(cmd, settings, stdout);
        return 1;
    }
    if (!strcmp(word, "--print-config")) return 2;
    if (word[0] != '-' || !word[1]) return take_positional(cmd, settings, word);
    char flag[128];
    const char *eq = !strncmp(word, "--", 2) ? strchr(word, '=') : NULL;
    snprintf(flag, sizeof flag, "%.*s", eq ? (int)(eq - word) : (int)strlen(word), word);
    bool negated;
    const option_view *v = find_option(views, n, flag, &negated);
    if (!v) {
        fprintf(stderr, "cllm %s: unknown option '%s' (see cllm %s --help)\n", cmd->name, flag, cmd->name);
        return -1;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!takes_value(v->row) && value) {
        fprintf(stderr, "cllm %s: %s takes no value, got '%s'\n", cmd->name, flag, value);
        return -1;
    }
    if (takes_value(v->row) && !value) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "cllm %s: option %s needs a value (%s)\n", cmd->name, flag,
                    v->row->metavar ? v->row->metavar : "see --help");
            return -1;
        }
        value = argv[++*i];
    }
    return set_value(cmd->name, v, flag, value, negated);
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *settings) {
    if (check_tables(cmd)) {
        fprintf(stderr, "cllm %s: internal error in the option table: %s\n", cmd->name, err_get());
        return -1;
    }
    int n;
    option_view *views = views_of(cmd, settings, &n);
    if (!views) {
        fprintf(stderr, "cllm: out of memory\n");
        return -1;
    }
    bool print = false;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        rc = parse_word(cmd, views, n, argc, argv, &i, settings);
        if (rc == 2) print = true, rc = 0;
    }
    if (rc == 0 && print) {
        print_config(cmd, views, n, settings);
        rc = 1;
    }
    if (rc == 0) rc = check_required(cmd, views, n, settings);
    free(views);
    return rc;
}

void cli_free(const cli_command *cmd, void *settings) {
    for (const cli_section *s = cmd->sections; s->group; s++)
        for (const cli_option *o = s->group->options; o->name; o++)
            if (o->kind == CLI_LIST && section_takes(s, o)) {
                cli_list *l = (cli_list *)((char *)settings + s->offset + o->offset);
                free(l->items);
                *l = (cli_list){0};
            }
    for (const cli_positional *p = cmd->positionals; p && p->metavar; p++)
        if (p->list) {
            cli_list *l = (cli_list *)((char *)settings + p->offset);
            free(l->items);
            *l = (cli_list){0};
        }
}
