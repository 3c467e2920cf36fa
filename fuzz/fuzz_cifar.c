/* libFuzzer harness: the CIFAR-10 batch loader on arbitrary bytes, through
 * a temporary file (the loader's own path: size check, records, labels). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/dsgd-fuzz-cifar-%ld.bin", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    const char *paths[1] = { path };
    dataset_t d;
    char err[512];
    if (cifar_load_files(paths, 1, &d, err, sizeof err) == 0) dataset_free(&d);
    unlink(path);
    return 0;
}
