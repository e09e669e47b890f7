/* The few MPI operations tensor parallelism needs, behind plain C: joining
 * the job, a broadcast from rank 0, a float sum over the ranks, and leaving.
 * tp_comm_mpi.c implements them with MPI when cllm is built with it
 * (CLLM_MPI, on when CMake finds MPI); tp_comm_none.c otherwise, where
 * joining fails with a message that says how to build with MPI. Everything
 * else in src/parallel is MPI-free. */
#ifndef CLLM_PARALLEL_TP_COMM_H
#define CLLM_PARALLEL_TP_COMM_H

#include <stdbool.h>
#include <stddef.h>

/* Joins the MPI job (MPI_Init_thread, MPI_THREAD_SERIALIZED: the engine's
 * thread makes the calls, one at a time). -1 with err_get() on failure. */
int comm_join(int *rank, int *size);
void comm_leave(void);
/* Ends every rank of the job (after a rank cannot go on: the others would
 * wait for it forever). */
void comm_abort(int code);
/* Broadcasts bytes from rank 0. With idle set, a rank other than 0 sleeps
 * between polls while nothing comes (the followers' wait for the next step,
 * which may be long when the server is idle), rather than spinning a core. */
int comm_bcast(void *buf, size_t bytes, bool idle);
/* x[n] becomes the sum of every rank's x[n]. */
int comm_allreduce_sum(float *x, size_t n);

#endif
