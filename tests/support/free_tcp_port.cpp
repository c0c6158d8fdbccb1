#include "tests/support/free_tcp_port.h"

#include "harness/runner/local_launcher.h"

namespace sb::test {

int free_tcp_port() { return free_loopback_port(); }

}  // namespace sb::test
