/* libFuzzer harness: the IDX parser (raw and gzip) on arbitrary bytes, the
 * same idx_parse the loader runs on a file's contents. The first byte picks
 * an image (3 dims) or a label (1 dim) file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int images = data[0] & 1;
    uint32_t dims[3];
    unsigned char *body = NULL;
    char err[512];
    if (idx_parse(data + 1, size - 1, "fuzz", images ? 0x803u : 0x801u, images ? 3 : 1, dims, &body, err, sizeof err) == 0)
        free(body);
    return 0;
}
