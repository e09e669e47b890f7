/* Declarative command lines. Each command describes its options once, as
 * tables of cli_option rows, and the same tables drive parsing, `--help` and
 * `--print-config`. Settings shared by several commands (the model, the
 * engine, sampling, the server) are declared once in cli_groups.c, so a
 * setting has one spelling and one set of aliases in every command that has
 * it: vLLM's spelling is the canonical one, older ones stay as aliases.
 *
 * A command's settings live in one struct of its own; the shared groups'
 * settings are structs embedded in it. A row names its setting by offset
 * within its group's struct, and a section says where the group's struct
 * sits in the command's, so the whole description is static data:
 *
 *     typedef struct { cli_engine_settings engine; const char *file; } ppl_settings;
 *     static const cli_option k_ppl_options[] = {
 *         {.name = "--file", .aliases = "-f", .kind = CLI_STRING, .offset = offsetof(ppl_settings, file),
 *          .metavar = "TEXT", .help = "the text to score", .required = true},
 *         {0}};
 *     static const cli_section k_ppl_sections[] = {
 *         {.group = &(cli_group){"perplexity options", k_ppl_options}},
 *         {.group = &cli_engine_group, .offset = offsetof(ppl_settings, engine),
 *          .only = "--max-model-len --threads"},
 *         {0}};
 *
 * A command fills its struct with its defaults, then calls cli_parse; --help
 * shows those starting values as the defaults, so they cannot drift apart. */
#ifndef CLLM_CLI_CLI_OPTIONS_H
#define CLLM_CLI_CLI_OPTIONS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_FLAG,     /* bool, no value: set to true */
    CLI_FLAG_OFF, /* bool, no value: set to false (e.g. --no-progress) */
    CLI_BOOL,     /* bool: --NAME sets it, --no-NAME clears it (vLLM's boolean flags) */
    CLI_INT,      /* long in [min, max]; a starting value below min means "not set" */
    CLI_FLOAT,    /* double in [min, max] */
    CLI_STRING,   /* const char * into argv; NULL means "not set" */
    CLI_MEMORY,   /* size_t bytes: 2GiB, 512MiB, or a fraction of free memory (0.5); at most max when max > 0 */
    CLI_ENUM,     /* int: the index of the value among choices */
    CLI_LIST,     /* cli_list: every use adds its value (a repeatable option) */
    CLI_CUSTOM,   /* parsed and shown by the row's own parse and to_json */
} cli_kind;

typedef struct {
    const char **items; /* point into argv; the array is malloc'd (cli_free) */
    int n;
} cli_list;

typedef struct {
    const char *name;     /* canonical spelling, "--max-model-len" */
    const char *aliases;  /* other spellings, space separated ("-c --ctx-size --ctx"), or NULL */
    cli_kind kind;
    size_t offset;        /* of the setting within the group's settings struct */
    const char *metavar;  /* the value in --help ("N"); CLI_ENUM defaults to its choices "a|b" */
    const char *help;
    const char *default_text; /* --help's "(default ...)" when the starting value does not say it */
    double min, max;      /* CLI_INT and CLI_FLOAT bounds; CLI_MEMORY: max only */
    const char *const *choices; /* CLI_ENUM: NULL-terminated */
    bool required;
    bool secret;          /* --print-config shows whether it is set, not the value */
    /* CLI_CUSTOM: store the value or return -1 with err_set naming `flag`;
     * show the setting as JSON (NULL or json_null() when not set). */
    int (*parse)(const char *flag, const char *value, void *setting);
    json_t *(*to_json)(const void *setting);
} cli_option;

/* Options that belong together; the array ends with a row whose name is NULL. */
typedef struct {
    const char *title; /* "engine options" */
    const cli_option *options;
} cli_group;

/* How one command differs on a shared option. Zero fields change nothing. */
typedef struct {
    const char *name; /* canonical name of the option */
    const char *help;
    const char *default_text;
    double min, max;  /* used when min < max */
    bool required;
} cli_override;

/* A group as one command uses it. Arrays of sections end with group NULL. */
typedef struct {
    const cli_group *group;
    const char *title;             /* --help's heading; NULL: the group's. Equal neighbours share one. */
    size_t offset;                 /* of the group's settings within the command's settings */
    const char *only;              /* canonical names of the options taken, space separated; NULL: all */
    const cli_override *overrides; /* ends with name NULL; may be NULL */
} cli_section;

/* A word without a leading '-'. Slots fill in order; a slot whose setting is
 * already set (e.g. MODEL after -m) is skipped. */
typedef struct {
    const char *metavar; /* "MODEL"; --print-config's key when no option shares the setting */
    size_t offset;       /* of a const char * (or, with list, a cli_list) in the command's settings */
    bool required;
    bool list;           /* takes every remaining word (last slot only) */
} cli_positional;

typedef struct {
    const char *name;     /* "bench offline": messages say "cllm bench offline: ..." */
    const char *synopsis; /* usage line after the name */
    const char *about;    /* a paragraph: what the command does */
    const cli_section *sections;
    const cli_positional *positionals; /* ends with metavar NULL; may be NULL */
    const char *notes;    /* text after the options; may be NULL */
} cli_command;

/* Parses argv[1..argc) into settings (which hold the defaults already).
 * Returns 0 to run the command; 1 when --help or --print-config was answered
 * (exit 0); -1 after printing "cllm NAME: ..." about a bad command line
 * (exit 1). Understands --NAME VALUE, --NAME=VALUE, -h/--help and
 * --print-config in every command; --print-config prints the settings as
 * JSON (keys: canonical names without the dashes) before required options
 * are checked, so any part of a command line can be inspected. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *settings);
/* The generated --help text. */
void cli_print_help(const cli_command *cmd, const void *settings, FILE *f);
/* Frees what parsing allocated (the arrays of CLI_LIST settings). */
void cli_free(const cli_command *cmd, void *settings);
/* One line naming the problem and the usage, "cllm NAME: MESSAGE (usage: ...)",
 * for checks a command makes after cli_parse. Returns -1. */
int cli_usage_error(const cli_command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
