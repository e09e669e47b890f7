/* cllm command line: dispatches to one file per subcommand. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command k_commands[] = {
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"chat", cmd_chat, "chat with a model in the terminal"},
    {"generate", cmd_generate, "generate text from a prompt (or a file of prompts)"},
    {"info", cmd_info, "describe a model: architecture, sizes, memory"},
    {"bench", cmd_bench, "benchmarks: offline (engine) and serve (an OpenAI-compatible server)"},
    {"tokenize", cmd_tokenize, "print the token ids of text read from stdin"},
    {"embed", cmd_embed, "print the embedding of each line read from stdin (a BERT embedding model)"},
    {"logits", cmd_logits, "write the logits of a token sequence (for tests)"},
    {"quantize", cmd_quantize, "quantize a model's weights (RTN, GPTQ, AWQ) into a new GGUF file"},
    {"perplexity", cmd_perplexity, "perplexity of a model on a text file, in chunks (as llama-perplexity)"},
    {"eval-compare", cmd_eval_compare, "compare two models' greedy outputs on a prompt set; gate on agreement"},
    {"medusa", cmd_medusa, "train Medusa heads for speculative decoding (cllm medusa train)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: cllm <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
    fprintf(f, "\n'cllm <command> --help' shows a command's options, and 'cllm <command> ... --print-config'\n"
               "the settings a command line gives (as JSON, without running).\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "cllm: unknown command '%s' (try 'cllm --help')\n", argv[1]);
    return 1;
}
