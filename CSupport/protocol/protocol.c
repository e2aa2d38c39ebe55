/* The protocol header's _Static_asserts run when this file is compiled, on both build paths
 * (SwiftPM for the watcher, tools/build-stub for the stub). */
#include "crashport_protocol.h"
