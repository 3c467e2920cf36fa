/* libFuzzer harness: the CIFAR-10 batch loader on arbitrary bytes, through
 * a file (the loader's own path: regular-file and size checks, records,
 * labels). The file is an in-memory one (memfd), named by its /proc path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("dsgd-fuzz-cifar", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) abort();
    const char *paths[1] = { path };
    dataset_t d;
    char err[512];
    if (cifar_load_files(paths, 1, &d, err, sizeof err) == 0) dataset_free(&d);
    return 0;
}
