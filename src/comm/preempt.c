/* comm/preempt — a preemption signal, whichever rank it reaches (comm.h). */
#include "comm.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "../util/sim.h"

/* The first signal's number (0: none yet). Atomic, and taken by one
 * compare-and-swap: the process has other threads (OpenMP's, OpenBLAS's),
 * two signals sent at once may run their handlers on two of them at the
 * same time, and exactly one of the two must be the first (a plain flag let
 * both see "none yet", and the second signal was lost: the run stopped
 * gracefully instead of at once). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a signal handler needs a lock-free int");
static atomic_int preempt_sig;

static void on_preempt(int sig)
{
    int none = 0;
    if (!atomic_compare_exchange_strong(&preempt_sig, &none, sig)) {   /* the second: now */
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

void comm_preempt_arm(void)
{
    if (sim_build()) return;   /* the simulated ranks share one process, and nobody is preempted there */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_preempt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

int comm_preempt_signal(void) { return atomic_load(&preempt_sig); }

const char *comm_preempt_name(void) { return atomic_load(&preempt_sig) == SIGINT ? "SIGINT" : "SIGTERM"; }

void comm_preempt_tell(comm_t *c, int lead)
{
    if (!atomic_load(&preempt_sig) || c->preempt_told || c->rank == lead) return;
    c->preempt_told = 1;
    static const int sig_sent = 0;   /* the message's content does not matter: its arrival does */
    MPI_Request q;
    /* to a dead lead nothing is delivered; the job ends by its own faults then */
    if (MPI_Isend(&sig_sent, 1, MPI_INT, lead, TAG_PREEMPT, c->world, &q) == MPI_SUCCESS) {
        MPI_Request_free(&q);
        c->msgs_sent++;
    }
}

int comm_preempt_heard(comm_t *c)
{
    int flag = 0, v;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_PREEMPT, c->world, &flag, &st) != MPI_SUCCESS || !flag) return 0;
    MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, TAG_PREEMPT, c->world, MPI_STATUS_IGNORE);
    return 1;
}
