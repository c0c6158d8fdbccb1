#pragma once

namespace sb::test {

// A loopback TCP port that was free a moment ago (free_loopback_port: below the
// ephemeral range, bound and released), for rendezvous stores in tests. Throws if no
// socket can be bound.
int free_tcp_port();

}  // namespace sb::test
