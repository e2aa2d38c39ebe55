/*
 * crash.c: the native half of Crash.java, a JNI library loaded with System.load. Its one
 * native method writes through a NULL pointer: a crash in native code under the JVM's own
 * SIGSEGV handler, which prints "A fatal error has been detected by the Java Runtime
 * Environment", writes hs_err and aborts.
 */
#include <jni.h>

static int *volatile nowhere; /* NULL, but the compiler cannot prove it */

__attribute__((noinline)) void crashport_jni_write_null(void) { *nowhere = 42; }

JNIEXPORT void JNICALL Java_Crash_crash(JNIEnv *environment, jclass class)
{
    (void)environment;
    (void)class;
    crashport_jni_write_null();
    __asm__ volatile(""); /* keep the call a call, not a tail jump */
}
