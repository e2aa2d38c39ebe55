/* One HTTP request for `crashport upload`, through libcurl, loaded when the first request is
 * made (dlopen "libcurl.so.4") rather than linked: every crashport process, the sidecar above
 * all, starts without curl and the TLS libraries it pulls in, and only the uploading process
 * maps them. libcurl brings what a client of a crash collector must do right and is not ours to
 * redo: TLS against the system's CAs (or a private CA file), HTTPS_PROXY/NO_PROXY from the
 * environment, timeouts, redirects refused. Its header (Debian libcurl4-openssl-dev) gives the
 * option numbers, which are ABI and never change.
 *
 * And gzip, for request bodies (Crashpad and Sentry both send them gzipped): zlib's deflate with
 * a gzip wrapper. */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    const char *missing;
} curl;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        curl.missing = "libcurl.so.4 is not installed (Debian: apt-get install libcurl4)";
        return;
    }
#define LOAD(field, name)                                         \
    *(void **)(&curl.field) = dlsym(library, name);               \
    if (curl.field == NULL) {                                     \
        curl.missing = "libcurl.so.4 lacks " name;                \
        return;                                                   \
    }
    LOAD(global_init, "curl_global_init")
    LOAD(easy_init, "curl_easy_init")
    LOAD(easy_setopt, "curl_easy_setopt")
    LOAD(easy_perform, "curl_easy_perform")
    LOAD(easy_getinfo, "curl_easy_getinfo")
    LOAD(easy_cleanup, "curl_easy_cleanup")
    LOAD(easy_strerror, "curl_easy_strerror")
    LOAD(slist_append, "curl_slist_append")
    LOAD(slist_free_all, "curl_slist_free_all")
#undef LOAD
    curl.global_init(CURL_GLOBAL_DEFAULT);
}

/* A growing buffer for what the server sends, capped: a collector's answer is small, and one
 * that is not is cut (the cap is the caller's). */
struct cp_http_sink {
    char *bytes;
    size_t size;
    size_t cap;
};

static size_t cp_http_keep(char *data, size_t size, size_t count, void *context) {
    struct cp_http_sink *sink = context;
    size_t length = size * count;
    size_t room = sink->cap > sink->size ? sink->cap - sink->size : 0;
    size_t take = length < room ? length : room;
    if (take > 0) {
        char *grown = realloc(sink->bytes, sink->size + take + 1);
        if (grown == NULL) return 0;
        sink->bytes = grown;
        memcpy(sink->bytes + sink->size, data, take);
        sink->size += take;
        sink->bytes[sink->size] = '\0';
    }
    return length;
}

int cp_http_post(const char *url, const char *const *headers, int header_count, const void *body, size_t body_size,
                 long timeout_ms, const char *ca_file, long *status, char **response, size_t *response_size,
                 char **response_headers, size_t *response_headers_size, char *error, size_t error_size) {
    pthread_once(&curl_once, curl_load);
    *status = 0;
    *response = NULL;
    *response_headers = NULL;
    *response_size = 0;
    *response_headers_size = 0;
    if (curl.missing != NULL) {
        snprintf(error, error_size, "%s", curl.missing);
        return -1;
    }
    CURL *handle = curl.easy_init();
    if (handle == NULL) {
        snprintf(error, error_size, "curl_easy_init failed");
        return -1;
    }
    struct curl_slist *list = NULL;
    for (int i = 0; i < header_count; i++) list = curl.slist_append(list, headers[i]);
    struct cp_http_sink content = {NULL, 0, 1 << 20}, head = {NULL, 0, 64 << 10};
    char message[CURL_ERROR_SIZE] = "";
    curl.easy_setopt(handle, CURLOPT_URL, url);
    curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl.easy_setopt(handle, CURLOPT_POST, 1L);
    curl.easy_setopt(handle, CURLOPT_POSTFIELDS, body);
    curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_size);
    curl.easy_setopt(handle, CURLOPT_HTTPHEADER, list);
    curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl.easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
    curl.easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);
    curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, message);
    curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, cp_http_keep);
    curl.easy_setopt(handle, CURLOPT_WRITEDATA, &content);
    curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, cp_http_keep);
    curl.easy_setopt(handle, CURLOPT_HEADERDATA, &head);
    curl.easy_setopt(handle, CURLOPT_USERAGENT, "crashport");
    if (ca_file != NULL && ca_file[0] != '\0') curl.easy_setopt(handle, CURLOPT_CAINFO, ca_file);
    CURLcode result = curl.easy_perform(handle);
    int outcome = 0;
    if (result != CURLE_OK) {
        snprintf(error, error_size, "%s", message[0] != '\0' ? message : curl.easy_strerror(result));
        outcome = -1;
    } else {
        curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, status);
    }
    curl.slist_free_all(list);
    curl.easy_cleanup(handle);
    *response = content.bytes;
    *response_size = content.size;
    *response_headers = head.bytes;
    *response_headers_size = head.size;
    return outcome;
}

void cp_http_free(void *bytes) { free(bytes); }

int cp_gzip(const void *input, size_t size, void **output, size_t *output_size) {
    if (size > 0xFFFFFFFFu) return -1; /* zlib counts in uInt; no report is that large */
    z_stream stream;
    memset(&stream, 0, sizeof stream);
    if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, MAX_WBITS + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    uLong bound = deflateBound(&stream, (uLong)size) + 32;
    unsigned char *buffer = malloc(bound);
    if (buffer == NULL) {
        deflateEnd(&stream);
        return -1;
    }
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)size;
    stream.next_out = buffer;
    stream.avail_out = (uInt)bound;
    int result = deflate(&stream, Z_FINISH);
    deflateEnd(&stream);
    if (result != Z_STREAM_END) {
        free(buffer);
        return -1;
    }
    *output = buffer;
    *output_size = stream.total_out;
    return 0;
}
