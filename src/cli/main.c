/* cllm command line: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(stderr, "usage: cllm <generate|info> ...\n");
        return argc < 2 ? 1 : 0;
    }
    fprintf(stderr, "cllm: unknown command '%s'\n", argv[1]);
    return 1;
}
