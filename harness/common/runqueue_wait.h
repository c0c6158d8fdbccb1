#pragma once
// How long this process's threads were ready to run but had no CPU: the time other
// processes (or other threads of this one) took the cores from it. Read from Linux's
// per-task scheduler statistics, /proc/self/task/<tid>/schedstat, whose second field is
// the nanoseconds the task spent waiting on a run queue; summed over the process's
// threads (compute, intra-op pool, the collectives' threads).
//
// On a machine whose cores a timed run has to itself this stays small; a parallel build,
// a second experiment or a noisy neighbour shows up here as waiting while the timings
// stretch. The trainer records the difference over each iteration (records.jsonl
// `runqueue_wait_ms`) so that a report can tell contended timings from slow code.

#include <optional>

namespace sb {

// Cumulative run-queue wait of all live threads of this process (ms), or nullopt where
// /proc/self/task/*/schedstat cannot be read (not Linux, or a kernel without
// CONFIG_SCHED_INFO). Threads that exited take their share with them; a difference
// between two readings is therefore a lower bound when threads end in between.
std::optional<double> process_runqueue_wait_ms();

}  // namespace sb
