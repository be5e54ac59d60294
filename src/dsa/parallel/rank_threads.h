// run_ranks: runs fn(comm) once per rank of an in-process group, each on its own thread, and
// joins them. A rank that throws aborts the group (so the others stop waiting in their
// collectives with an error naming it); run_ranks then rethrows the failed rank's own error
// (the cause: the lowest rank that failed on its own, not the others' GroupStopped errors),
// prefixed with its rank.
#pragma once
#include <functional>

#include "dsa/parallel/in_process_group.h"

namespace dsa::parallel {

void run_ranks(InProcessGroup& group, const std::function<void(Communicator&)>& fn);

}  // namespace dsa::parallel
