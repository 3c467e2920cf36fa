/* The paradigms' registry as data: every option a row says its paradigm
 * takes is an option of dsgd train, and the help text of every option
 * that names paradigms as its owners ("bsp: ...", "lbfgs/sandblaster:
 * ...") agrees with the rows, so the configuration line and --help say
 * the same thing. */
#include <string.h>

#include "run/config.h"
#include "sync/sync.h"
#include "test.h"

static int takes(const sync_ops_t *o, const char *name)
{
    for (const char *const *n = o->options; n && *n; n++)
        if (!strcmp(*n, name)) return 1;
    return 0;
}

static void test_options_exist(void)
{
    for (int i = 0; i < sync_count(); i++) {
        const sync_ops_t *o = sync_at(i);
        for (const char *const *n = o->options; n && *n; n++) {
            const opt_def_t *t = config_train_opts;
            while (t->name && strcmp(t->name, *n)) t++;
            CHECK(t->name, "%s takes --%s, which dsgd train does not have", o->name, *n);
        }
    }
}

/* An option whose help begins "A/B: " is taken by paradigms A and B; one
 * beginning "parameter server: " by every paradigm that runs shards (those
 * taking --servers). */
static void test_help_owners(void)
{
    int owned_somewhere = 0;
    for (const opt_def_t *t = config_train_opts; t->name; t++) {
        size_t n = strspn(t->help, "abcdefghijklmnopqrstuvwxyz/- ");
        if (t->help[n] != ':') continue;
        char owners[128];
        snprintf(owners, sizeof owners, "%.*s", (int)n, t->help);
        for (int i = 0; i < sync_count(); i++) {
            const sync_ops_t *o = sync_at(i);
            int named = 0;
            if (!strcmp(owners, "parameter server")) named = takes(o, "servers");
            for (char *s = owners, *tok; (tok = strsep(&s, "/"));) named |= !strcmp(tok, o->name);
            snprintf(owners, sizeof owners, "%.*s", (int)n, t->help);   /* strsep cut it */
            CHECK(named == takes(o, t->name), "--%s's help names %s as its owners, but %s %s it", t->name, owners,
                  o->name, named ? "does not take" : "takes");
            owned_somewhere |= named;
        }
    }
    CHECK(owned_somewhere, "no option's help names a paradigm: the check checked nothing");
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_options_exist);
    RUN(test_help_owners);
    return TEST_END("test_registry");
}
