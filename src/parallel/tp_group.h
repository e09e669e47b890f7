/* A tensor-parallel job: N processes started by mpirun, each holding one
 * shard of the model (model/shard.h).
 *
 * Rank 0 is the leader: it runs the command (serves HTTP, schedules,
 * samples) with its shard, and tp_group_attach sets its model's hooks so
 * that each forward first sends the batch to the others, and each KV block
 * copy is sent too. Ranks above 0 are followers: tp_group_follow runs the
 * same forwards over their shards and their own KV caches, taking part in
 * the two all-reduces of every layer, until the leader's tp_group_leave.
 * The messages are tp_plan.h's. */
#ifndef CLLM_PARALLEL_TP_GROUP_H
#define CLLM_PARALLEL_TP_GROUP_H

#include "model/model.h"

typedef struct tp_group tp_group;

/* Joins the MPI job started by mpirun; its size must be `size` (> 1).
 * NULL with err_get() when cllm has no MPI or the job has another size. */
tp_group *tp_group_join(int size);
int tp_group_rank(const tp_group *g);
int tp_group_size(const tp_group *g);
/* Sets m's tensor-parallel hooks (m is this rank's shard): the all-reduce
 * on every rank, and on the leader the hooks that send forwards and block
 * copies. */
void tp_group_attach(tp_group *g, model *m);
/* A follower's loop: runs what the leader sends with n_threads threads,
 * until it leaves. m may be NULL after a failed load: then it waits for
 * the leader, which fails the same way, to leave. Returns 0, or -1 with err_get() (then the job must be
 * aborted, tp_group_abort: the leader would wait forever). */
int tp_group_follow(tp_group *g, model *m, int n_threads);
/* Leader: tells the followers to stop. Every rank: leaves the job and frees g. */
void tp_group_leave(tp_group *g);
/* Ends every process of the job with this exit code. */
void tp_group_abort(tp_group *g, int code);

#endif
