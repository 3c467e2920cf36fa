/* comm/liveness: the deadlines, and the awake clock (liveness.h). */
#include "liveness.h"

#include "../util/util.h"

double live_deadline(double T, live_deadline_t which)
{
    switch (which) {
    case LIVE_SILENT: return T;
    case LIVE_KEEPALIVE: return T / 4;
    case LIVE_AWAY: return T / 4;
    case LIVE_AWAY_POLL: return T / 4 < 0.25 ? T / 4 : 0.25;
    case LIVE_STALL: return T / 2;
    case LIVE_READ: return T / 2;
    case LIVE_LOOK: return T / 10;
    case LIVE_SEND: return 2 * T;
    case LIVE_NOTICE: return T + 5;
    case LIVE_FINISH: return T + 10;
    case LIVE_SHARD: return 2 * T + 10;
    case LIVE_GOODBYE: return 3 * T + 10;
    case LIVE_READ_ABORT: return 2 * T + 5;
    case LIVE_ROLLCALL: return 2.0 + T / 4;
    }
    return T;
}

double live_awake(live_clock_t *k, double gap)
{
    const double now = now_s();
    if (k->tick > 0 && now - k->tick > gap) k->away += now - k->tick;
    k->tick = now;
    return now - k->away;
}
