/* crashport.toml through toml++ (Debian's libtomlplusplus-dev, header-only here): the text's
 * tables as JSON, which the watcher reads with the JSON reader it already has. */
#ifndef CRASHPORT_TOML_H
#define CRASHPORT_TOML_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses `length` bytes of TOML 1.0. On success: 0, and *json a malloc'd NUL-terminated JSON
 * object (TOML's dates and times as strings), for the caller to free. On a parse error: the line
 * it is on (1-based, 0 when unknown), and *json toml++'s description of it, also malloc'd.
 * -1 (and *json NULL) when memory ran out. */
int cp_toml_to_json(const char *text, size_t length, char **json);

#ifdef __cplusplus
}
#endif

#endif
