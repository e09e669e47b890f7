/* `cllm bench`: dispatches to the benchmark modes, one file each. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

int bench_offline(int argc, char **argv);
int bench_serve(int argc, char **argv); /* serve and plot: bench_serve.c */

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: cllm bench offline -m MODEL [options]   engine throughput/latency, no HTTP\n"
                "       cllm bench serve [options]            load an OpenAI-compatible server\n"
                "       cllm bench plot DIR RESULT.json...    charts of saved serve results\n");
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "offline")) return bench_offline(argc - 1, argv + 1);
    if (!strcmp(argv[1], "serve") || !strcmp(argv[1], "plot")) return bench_serve(argc - 1, argv + 1);
    fprintf(stderr, "cllm bench: unknown mode '%s' (offline, serve, plot)\n", argv[1]);
    return 1;
}
