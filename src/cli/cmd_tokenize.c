/* Placeholder: replaced by the real command. */
#include "cli/commands.h"

#include <stdio.h>

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cllm tokenize: not built yet\n");
    return 1;
}
