/*
 * test_crash.c: a program that crashes on purpose through crashport_test_crash() ("crash"), or
 * exits cleanly ("clean"), after printing what crashport_last_run says of its previous run.
 * Linked with libcrashport (TestCrashTests builds it). -O0: check_crash_reporting keeps its own
 * frame, the report's culprit.
 */
#include <stdio.h>
#include <string.h>

#include "crashport.h"

static void check_crash_reporting(void) { crashport_test_crash(); }

int main(int argc, char **argv)
{
    crashport_last_run_info info;
    int known = crashport_last_run(&info);
    printf("last_run %d crashed %d during_launch %d consecutive %d report %s\n", known, info.crashed,
           info.crashed_during_launch, info.consecutive_launch_crashes, info.report_id[0] != '\0' ? info.report_id : "-");
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "crash") == 0) check_crash_reporting();
    return 0;
}
