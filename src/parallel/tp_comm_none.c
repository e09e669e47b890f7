/* tp_comm.h in a build without MPI: nothing can join a job. */
#ifndef CLLM_HAVE_MPI
#include "parallel/tp_comm.h"

#include "util/error.h"

#include <stdlib.h>

int comm_join(int *rank, int *size) {
    *rank = 0;
    *size = 1;
    return err_set("this cllm was built without MPI; install OpenMPI (libopenmpi-dev openmpi-bin) and "
                   "reconfigure with CMake (-DCLLM_MPI=ON) for --tensor-parallel-size");
}

void comm_leave(void) {}

void comm_abort(int code) { exit(code); }

int comm_bcast(void *buf, size_t bytes, bool idle) { return err_set("no MPI in this build"); }

int comm_allreduce_sum(float *x, size_t n) { return err_set("no MPI in this build"); }
#endif
