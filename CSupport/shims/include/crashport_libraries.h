/*
 * crashport_libraries.h: every C library function the Swift side calls, declared by the
 * library's own header (zlib, liblzma, libzstd, libiberty) or, where the only header is C++ or internal
 * to its project, with its exact signature here. Nothing is declared in Swift with
 * @_silgen_name. Linked by Package.swift (Symbolication: -lz -liberty -lstdc++; CShims: -llzma; Watcher: -lzstd).
 */
#ifndef CRASHPORT_LIBRARIES_H
#define CRASHPORT_LIBRARIES_H

#include <stddef.h>
#include <stdint.h>

#include <libiberty/demangle.h> /* rust_demangle, DMGL_* (GNU libiberty, binutils' demangler) */
#include <lzma.h>               /* lzma_stream_buffer_decode (MiniDebugInfo) */
#include <malloc.h>             /* malloc_trim (a sidecar's heap once a storm's reports are done) */
#include <sys/xattr.h>          /* getxattr (a program's file capabilities, for --trace-exit) */
#include <zlib.h>               /* uncompress, crc32 (compressed sections, .gnu_debuglink) */
#include <zstd.h>               /* ZSTD_compressStream2 (--keep-core: the core as coredumpctl reads it) */

/* The Itanium C++ ABI's demangler, from the C++ runtime (libstdc++); <cxxabi.h> is C++ only.
 * Returns a malloc'd string, or NULL with *status set. */
char *__cxa_demangle(const char *mangled_name, char *output_buffer, size_t *length, int *status);

/* The Swift runtime's demanglers, exported by libswiftCore. swift_demangle is the runtime's
 * public C entry point (swift/Runtime/Demangle.h), giving the full form.
 * _swift_backtrace_demangle is the SPI Swift's own backtracer calls (stdlib/public/runtime/
 * Backtrace.cpp) for the simplified names its crash logs print ("specialized
 * Inventory.item(at:)"), which is why crashport prefers it. Both return a malloc'd string (when
 * output_buffer is NULL) or NULL when the name is not a Swift symbol. */
char *swift_demangle(const char *mangled_name, size_t mangled_name_length, char *output_buffer,
                     size_t *output_buffer_size, uint32_t flags);
char *_swift_backtrace_demangle(const char *mangled_name, size_t mangled_name_length, char *output_buffer,
                                size_t *output_buffer_size);

#endif
