/* Placeholder: replaced by the real command. */
#include "cli/commands.h"

#include <stdio.h>

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cllm serve: not built yet\n");
    return 1;
}
