/* libelf (elfutils, Debian libelf-dev) as a Swift module: ObjectFile reads ELF containers
 * through gelf_* and decompresses sections with elf_compress. */
#include <gelf.h>
#include <libelf.h>
