// capstone (Debian libcapstone-dev), the disassembler the fault explanation decodes the faulting
// instruction with (Reports/FaultInstruction.swift): x86 now, and arm64 from the same API later.
#include <capstone/capstone.h>
