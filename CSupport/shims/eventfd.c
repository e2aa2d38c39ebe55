/* eventfd(2), which Swift's Glibc module does not import (no <sys/eventfd.h> in it): the
 * counter a cgroup v1 memory threshold or OOM notice is delivered on (cgroup.event_control). */
#include "crashport_shims.h"

#include <sys/eventfd.h>

int cp_eventfd(unsigned initial, int nonblocking)
{
    return eventfd(initial, EFD_CLOEXEC | (nonblocking ? EFD_NONBLOCK : 0));
}
