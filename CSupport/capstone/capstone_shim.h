// capstone (Debian libcapstone-dev), the disassembler the fault explanation decodes the faulting
// instruction with (Reports/MachineInstruction.swift): x86 now, and arm64 from the same API
// later. Its types only: the library is not linked but loaded at the first decode (dlopen of
// libcapstone.so.4), since its relocated tables cost every idle watcher 3 MB of memory.
#include <capstone/capstone.h>
