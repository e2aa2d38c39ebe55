/*
 * last-report.c: what became of the last crash report, told to the user (App Center's "your
 * report was sent"), and the program's recent reports with their send states.
 *
 *   cc -g -o last-report last-report.c $(pkg-config --cflags --libs crashport)
 *   crashport run -- ./last-report crash          # crashes: a report
 *   crashport upload --sentry-dsn https://KEY@sentry.example.com/42
 *   crashport run -- ./last-report                # "your last crash report was sent (id …)"
 *   crashport run -- ./last-report states         # every recent report and its state
 */
#include <crashport.h>
#include <stdio.h>
#include <string.h>

static const char *state_name(int state)
{
    switch (state) {
    case CRASHPORT_SEND_AWAITING_CONSENT: return "awaiting consent";
    case CRASHPORT_SEND_PENDING: return "pending";
    case CRASHPORT_SEND_SENT: return "sent";
    case CRASHPORT_SEND_FAILED: return "failed";
    case CRASHPORT_SEND_NOT_SENT: return "not sent";
    default: return "none";
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    crashport_install(NULL);
    crashport_run_detail last = CRASHPORT_RUN_DETAIL_INIT;
    if (crashport_last_run_detail(&last) == 0 && last.report_id[0] != '\0') {
        switch (last.send_state) {
        case CRASHPORT_SEND_SENT:
            printf("your last crash report was sent (id %s)\n", last.send_id);
            break;
        case CRASHPORT_SEND_FAILED:
            printf("your last crash report could not be sent: %s\n", last.send_reason);
            break;
        case CRASHPORT_SEND_AWAITING_CONSENT:
            printf("your last crash report waits for your consent\n");
            break;
        default:
            printf("your last crash report is %s: %s\n", state_name(last.send_state), last.send_reason);
        }
    }
    if (strcmp(mode, "states") == 0) {
        crashport_report_state states[CRASHPORT_PENDING_MAX];
        int count = crashport_report_states(states, CRASHPORT_PENDING_MAX);
        if (count < 0) printf("states: %s\n", strerror(-count));
        for (int i = 0; i < count; i++) {
            printf("report %s %s: %s %s %s\n", states[i].report.id, states[i].report.kind, state_name(states[i].send_state),
                   states[i].send_id[0] ? states[i].send_id : "-", states[i].send_reason);
        }
    }
    fflush(stdout);
    if (strcmp(mode, "crash") == 0) {
        int *volatile nothing = NULL;
        return *nothing;
    }
    return 0;
}
