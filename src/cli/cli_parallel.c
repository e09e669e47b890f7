/* See cli_parallel.h. */
#include "cli/cli_parallel.h"

#include "util/error.h"

#include <stddef.h>
#include <stdio.h>

const cli_group cli_parallel_group = {
    "parallel options",
    (const cli_option[]){
        {.name = "--tensor-parallel-size", .aliases = "-tp", .kind = CLI_INT,
         .offset = offsetof(cli_parallel_settings, tensor_parallel_size), .metavar = "N", .min = 1, .max = 1024,
         .help = "split the attention heads and FFN columns over N processes started by mpirun -np N (MPI); "
                 "rank 0 does the command's work, the others follow its batches"},
        {0}}};

int cli_tp_join(cli_tp *t, long size) {
    t->g = NULL;
    if (size <= 1) return 0;
    t->g = tp_group_join((int)size);
    return t->g ? 0 : -1;
}

bool cli_tp_is_follower(const cli_tp *t) { return t->g && tp_group_rank(t->g) > 0; }

model *cli_tp_load(cli_tp *t, const char *path) {
    if (!t->g) return model_load(path);
    model *m = model_load_shard(path, tp_group_rank(t->g), tp_group_size(t->g));
    if (m) tp_group_attach(t->g, m);
    return m;
}

int cli_tp_follow(cli_tp *t, const char *path, long n_threads) {
    const int rank = tp_group_rank(t->g);
    model *m = cli_tp_load(t, path);
    const bool loaded = m != NULL;
    if (!m) fprintf(stderr, "cllm: tensor parallel rank %d: %s\n", rank, err_get());
    if (tp_group_follow(t->g, m, (int)n_threads)) {
        fprintf(stderr, "cllm: tensor parallel rank %d: %s\n", rank, err_get());
        tp_group_abort(t->g, 1);
    }
    model_free(m);
    cli_tp_leave(t);
    return loaded ? 0 : 1;
}

void cli_tp_leave(cli_tp *t) {
    tp_group_leave(t->g);
    t->g = NULL;
}
