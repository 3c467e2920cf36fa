/* comm/preempt — a preemption signal, whichever rank it reaches (comm.h). */
#include "comm.h"

#include <signal.h>
#include <string.h>

#include "../util/sim.h"

static volatile sig_atomic_t preempt_sig;

static void on_preempt(int sig)
{
    if (preempt_sig) {   /* the second: now */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    preempt_sig = sig;
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

int comm_preempt_signal(void) { return preempt_sig; }

const char *comm_preempt_name(void) { return preempt_sig == SIGINT ? "SIGINT" : "SIGTERM"; }

void comm_preempt_tell(comm_t *c, int lead)
{
    if (!preempt_sig || c->preempt_told || c->rank == lead) return;
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
