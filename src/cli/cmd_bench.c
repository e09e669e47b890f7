/* `cllm bench`: dispatches to the benchmark modes, one file each. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

int bench_offline(int argc, char **argv);

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: cllm bench offline -m MODEL [options]   engine throughput/latency, no HTTP\n");
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "offline")) return bench_offline(argc - 1, argv + 1);
    fprintf(stderr, "cllm bench: unknown mode '%s' (offline)\n", argv[1]);
    return 1;
}
