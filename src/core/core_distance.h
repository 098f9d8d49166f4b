// How far apart two CPUs are: the round trip of a cache line bounced between two threads pinned
// to them (one writes, the other waits to see it and answers). On one CCD of a Zen or one Xeon die
// a round trip takes well under 100 ns; across CCDs or sockets several hundred. A cloud guest may
// get either, and it decides what handing data from one thread to another costs: whether waking a
// second core pays for a small kernel (Target::near_cores), and what the depthwise convs of a
// MobileNet pay for reading what another core wrote.
#pragma once

#include <vector>

namespace opfuse {

// The CPUs this process may run on (its affinity mask), ascending.
std::vector<int> allowed_cpus();

// Nanoseconds per round trip between CPUs a and b, one figure per round of `bounces` round trips,
// each side on a thread of its own pinned to its CPU (the caller's thread and affinity are left
// alone). An untimed round comes first: an idle core takes tens of microseconds to wake, more than
// a thousand round trips. Empty when a thread cannot be pinned there; shorter than `rounds` when
// the bounces overrun `deadline_ms` (a vCPU descheduled by the host, or a busy CPU): no figure
// rather than a wrong one.
std::vector<double> core_round_trips_ns(int cpu_a, int cpu_b, int rounds, int bounces, double deadline_ms);

}  // namespace opfuse
