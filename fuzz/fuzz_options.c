/* libFuzzer harness: the option parser and validator. The input is split
 * at NUL bytes and newlines into arguments, as a shell would pass them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "run/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char *argv[64];
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    int argc = 0;
    for (char *p = text; argc < 64 && p <= text + size;) {
        argv[argc++] = p;
        size_t n = strcspn(p, "\n");
        if (p + n >= text + size) break;
        p[n] = 0;
        p += n + 1;
    }
    char err[512];
    for (int t = 0; t < 2; t++) {
        const opt_def_t *table = t ? config_eval_opts : config_train_opts;
        config_t c;
        config_defaults(&c, table);
        if (config_parse(&c, table, argc, argv, err, sizeof err) == 0) config_validate(&c, err, sizeof err);
    }
    free(text);
    return 0;
}
