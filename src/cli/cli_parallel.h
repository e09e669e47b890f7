/* --tensor-parallel-size for the commands that run a model across the
 * processes of an MPI job (generate, serve, logits): joining the job,
 * loading this rank's shard, and, on ranks above 0, the whole life of a
 * follower (src/parallel/tp_group.h). A command does:
 *
 *     cli_tp tp;
 *     if (cli_tp_join(&tp, size)) error;
 *     if (cli_tp_is_follower(&tp)) return cli_tp_follow(&tp, path, threads);
 *     model *m = cli_tp_load(&tp, path);   // the whole model when size is 1
 *     ... the command, on rank 0 ...
 *     cli_tp_leave(&tp);                   // also after an error */
#ifndef CLLM_CLI_PARALLEL_H
#define CLLM_CLI_PARALLEL_H

#include "cli/cli_options.h"
#include "model/model.h"
#include "parallel/tp_group.h"

#include <stdbool.h>

typedef struct {
    long tensor_parallel_size;
} cli_parallel_settings;

extern const cli_group cli_parallel_group;

typedef struct {
    tp_group *g; /* NULL: one process */
} cli_tp;

/* With size > 1 joins the MPI job, which must have that many processes.
 * -1 with err_get(). */
int cli_tp_join(cli_tp *t, long size);
bool cli_tp_is_follower(const cli_tp *t);
/* The whole model, or this rank's shard wired to the others. NULL with err_get(). */
model *cli_tp_load(cli_tp *t, const char *path);
/* A follower: loads its shard and runs the leader's forwards until it
 * leaves; returns the process's exit code (aborting the job on failure,
 * as the leader would wait for this rank forever). */
int cli_tp_follow(cli_tp *t, const char *path, long n_threads);
/* Rank 0 lets the followers go; every rank leaves the job. */
void cli_tp_leave(cli_tp *t);

#endif
