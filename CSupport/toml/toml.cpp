// toml++ compiled in (header-only), with exceptions off at the C boundary: a parse error comes
// back as a value, never as a C++ exception through Swift's frames.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_WINDOWS_COMPAT 0
#include <toml++/toml.h>

#include "crashport_toml.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>

static char *copy(const std::string &text) {
    char *out = static_cast<char *>(std::malloc(text.size() + 1));
    if (out) std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
}

extern "C" int cp_toml_to_json(const char *text, size_t length, char **json) {
    *json = nullptr;
    toml::parse_result result = toml::parse(std::string_view(text, length));
    if (!result) {
        const toml::parse_error &error = result.error();
        *json = copy(std::string(error.description()));
        if (!*json) return -1;
        return static_cast<int>(error.source().begin.line);
    }
    std::ostringstream out;
    out << toml::json_formatter{result.table(), toml::format_flags::none};
    *json = copy(out.str());
    return *json ? 0 : -1;
}
