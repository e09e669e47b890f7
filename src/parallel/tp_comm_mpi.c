/* tp_comm.h over MPI (built when CLLM_HAVE_MPI is defined). */
#ifdef CLLM_HAVE_MPI
#include "parallel/tp_comm.h"

#include "util/error.h"

#include <limits.h>
#include <mpi.h>
#include <time.h>

int comm_join(int *rank, int *size) {
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return err_set("MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return err_set("this MPI library offers thread level %d, tensor parallelism needs MPI_THREAD_SERIALIZED",
                       provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

void comm_leave(void) { MPI_Finalize(); }

void comm_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

/* Waits for a request, sleeping between polls (50 us, doubling to 2 ms). */
static int wait_idle(MPI_Request *req) {
    long ns = 50000;
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        if (done) return 0;
        nanosleep(&(struct timespec){.tv_nsec = ns}, NULL);
        if (ns < 2000000) ns *= 2;
    }
}

int comm_bcast(void *buf, size_t bytes, bool idle) {
    if (bytes > INT_MAX) return err_set("broadcast of %zu bytes is too large", bytes);
    if (!idle) {
        if (MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) return err_set("MPI_Bcast failed");
        return 0;
    }
    /* A non-blocking broadcast matches only non-blocking ones: every rank
     * uses this path for the same message. */
    MPI_Request req;
    if (MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req) != MPI_SUCCESS) return err_set("MPI_Ibcast failed");
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int rc = rank == 0 ? MPI_Wait(&req, MPI_STATUS_IGNORE) : wait_idle(&req);
    return rc == MPI_SUCCESS ? 0 : err_set("MPI broadcast failed");
}

int comm_allreduce_sum(float *x, size_t n) {
    if (n > INT_MAX) return err_set("all-reduce of %zu floats is too large", n);
    if (MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return err_set("MPI_Allreduce failed");
    return 0;
}
#endif
