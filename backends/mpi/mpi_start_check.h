// Bounded init (HOROVOD_START_TIMEOUT): before MPI_Init, which in Open MPI waits without limit
// for every process of the job (its startup fence), wait at most `timeout_seconds` for every
// rank to reach hvd::init(), and fail naming the ranks that did not. Uses PMIx, which Open MPI's
// mpirun and Slurm's srun --mpi=pmix provide: each rank publishes a key, then asks for every
// other rank's key with a timeout. Does nothing when the build has no PMIx, or the process was
// not started by a PMIx launcher. Background thread, once, at init.
#pragma once

namespace hvd::detail {

// Throws std::runtime_error naming the missing ranks. On success the PMIx client it opened stays
// open (closing it before MPI_Init breaks Open MPI's own): call finish_start_check() after
// MPI_Init, which then holds its own reference.
void wait_for_every_rank(double timeout_seconds);
void finish_start_check();

}  // namespace hvd::detail
