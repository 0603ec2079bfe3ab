// defines: launch_local_workers, free_local_port
//
// `trainc --nproc-per-node N ...`: what torchrun --nproc-per-node does on one host. Starts N
// copies of this program with the same arguments and the environment a data-parallel run reads
// (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT: a free port), waits for them,
// and reports every rank that failed. SIGINT and SIGTERM are passed on to the workers, which stop
// together at the next step and save a checkpoint.
#pragma once

#include <string>
#include <vector>

namespace trainc {

// Returns the exit code: 0 when every worker succeeded, else the first failed rank's (128 + signal
// for a worker killed by one). Workers still running 30 s after a failure are stopped.
int launch_local_workers(int nproc, const std::vector<std::string>& arguments);

// A port on 127.0.0.1 nobody listens on now (the kernel's choice), for a rendezvous moments later.
int free_local_port();

}  // namespace trainc
