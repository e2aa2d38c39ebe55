/* The C module CCrashport: crashport's public header, found through crashport.pc's Cflags. */
#include <crashport.h>
