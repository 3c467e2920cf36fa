/* The option parser: every numeric flag has a range, defaults lie inside
 * it, and values outside it or in a loose syntax are refused. */
#include <string.h>

#include "test.h"
#include "run/config.h"

static void test_every_numeric_flag_has_a_range(void)
{
    const opt_def_t *tables[2] = { config_train_opts, config_eval_opts };
    for (int t = 0; t < 2; t++)
        for (const opt_def_t *o = tables[t]; o->name; o++)
            if (o->type == OT_LONG || o->type == OT_DOUBLE)
                CHECK(config_range_known(o->name), "--%s has no range", o->name);
}

static int parse1(const char *flag, const char *value, char *err, size_t errlen)
{
    config_t c;
    config_defaults(&c, config_train_opts);
    char *argv[2] = { (char *)flag, (char *)value };
    return config_parse(&c, config_train_opts, 2, argv, err, errlen);
}

static void test_syntax_and_ranges(void)
{
    char err[256];
    static const char *bad[][2] = {
        { "--lr", "0x10" }, { "--lr", "nan" }, { "--lr", "-inf" }, { "--lr", " 1" }, { "--lr", "1 " },
        { "--lr", "0" }, { "--lr", "1e400" }, { "--batch", " 64" }, { "--batch", "64 " }, { "--batch", "+64" },
        { "--batch", "0x40" }, { "--batch", "0" }, { "--epochs", "9223372036854775807" },
        { "--steps", "99999999999999999999" }, { "--momentum", "1" }, { "--momentum", "-0.1" },
        { "--beta", "0" }, { "--threads", "257" }, { "--seed", "-1" }, { "--timeout", "0" }, { "--lr", "." },
        { "--lr", "1e" }, { "--batch", "" }, { "--batch", "-" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(parse1(bad[i][0], bad[i][1], err, sizeof err) != 0, "%s '%s' accepted", bad[i][0], bad[i][1]);
    static const char *good[][2] = {
        { "--lr", "0.05" }, { "--lr", "5e-2" }, { "--lr", ".5" }, { "--lr", "1E+1" }, { "--batch", "064" },
        { "--momentum", "0.999" }, { "--epochs", "0" }, { "--threads", "256" }, { "--beta", "1" },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(parse1(good[i][0], good[i][1], err, sizeof err) == 0, "%s '%s' refused: %s", good[i][0], good[i][1], err);
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_every_numeric_flag_has_a_range);
    RUN(test_syntax_and_ranges);
    return TEST_END("test_config");
}
