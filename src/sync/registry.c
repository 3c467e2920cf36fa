/* The table mapping --sync names to paradigm implementations. */
#include <stdio.h>
#include <string.h>

#include "sync.h"

extern const sync_ops_t sync_none, sync_bsp, sync_localsgd, sync_fedavg, sync_selsync;
extern const sync_ops_t sync_asp, sync_ssp, sync_dssp, sync_bsp_ps, sync_downpour, sync_easgd, sync_gossip;
extern const sync_ops_t sync_lbfgs, sync_sandblaster;

static const sync_ops_t *const registry[] = {
    &sync_none,
    &sync_bsp,
    &sync_localsgd,
    &sync_fedavg,
    &sync_selsync,
    &sync_bsp_ps,
    &sync_asp,
    &sync_ssp,
    &sync_dssp,
    &sync_downpour,
    &sync_easgd,
    &sync_gossip,
    &sync_lbfgs,
    &sync_sandblaster,
};

const sync_ops_t *sync_find(const char *name)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

int sync_count(void) { return (int)(sizeof registry / sizeof registry[0]); }
const sync_ops_t *sync_at(int i) { return registry[i]; }

void sync_names(char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0] && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? " | " : "", registry[i]->name);
}
