/*
 * addon.c: a Node-API addon (built with cc -shared against /usr/include/node; the node binary
 * provides the napi_ functions) whose functions crash on purpose:
 *   crash()  writes through NULL in native code, called from JavaScript
 *   fatal()  napi_fatal_error: Node's fatal error (its report with --report-on-fatalerror), abort()
 */
#include <node_api.h>
#include <stddef.h>

/* Volatile, so that the compiler cannot prove the write is through NULL and drop it. */
int *volatile crashport_addon_target = NULL;

__attribute__((noinline)) static void addon_write_null(void) { *crashport_addon_target = 42; }

static napi_value Crash(napi_env env, napi_callback_info info) {
    (void)env;
    (void)info;
    addon_write_null();
    return NULL;
}

static napi_value Fatal(napi_env env, napi_callback_info info) {
    (void)env;
    (void)info;
    napi_fatal_error("crashport_addon", NAPI_AUTO_LENGTH, "fatal on purpose", NAPI_AUTO_LENGTH);
    return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
    napi_value function;
    napi_create_function(env, "crash", NAPI_AUTO_LENGTH, Crash, NULL, &function);
    napi_set_named_property(env, exports, "crash", function);
    napi_create_function(env, "fatal", NAPI_AUTO_LENGTH, Fatal, NULL, &function);
    napi_set_named_property(env, exports, "fatal", function);
    return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
