/* Image decoding with stb_image, behind bounds checks: the header is read
 * first (stbi_info) so a huge or zero-sized image is refused before any
 * pixel is decoded; stb's own asserts are disabled (bad input is an error,
 * never an abort). */
#include "vision/vision.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define STBI_NO_STDIO
#define STBI_ASSERT(x) ((void)0)
#define STBI_MAX_DIMENSIONS (1 << 24)
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wcast-qual"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
/* stb declares static functions this file does not call; gcc reports them
 * at the end of the file, outside the push/pop above */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

void lmc_image_free(lmc_image *im) {
    if (!im) return;
    free(im->rgb);
    memset(im, 0, sizeof *im);
}

/* A PNG's IHDR width and height (stb reports a zero-sized PNG only as an
 * unknown format, after trying the other decoders). */
static bool png_size(const uint8_t *d, size_t n, uint32_t *w, uint32_t *h) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 24 || memcmp(d, sig, 8) || memcmp(d + 12, "IHDR", 4)) return false;
    *w = (uint32_t)d[16] << 24 | (uint32_t)d[17] << 16 | (uint32_t)d[18] << 8 | d[19];
    *h = (uint32_t)d[20] << 24 | (uint32_t)d[21] << 16 | (uint32_t)d[22] << 8 | d[23];
    return true;
}

lmc_status lmc_image_decode(const uint8_t *data, size_t size, const char *what, lmc_image *out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_decode: out is NULL");
    memset(out, 0, sizeof *out);
    if (!what) what = "image";
    if (!data || size == 0) return lmc_error(LMC_ERR_FORMAT, "%s: empty image file", what);
    if (size > INT_MAX)
        return lmc_error(LMC_ERR_LIMIT, "%s: %zu bytes is too large an image file", what, size);
    int w = 0, h = 0, comp = 0;
    uint32_t pw, ph;
    if (png_size(data, size, &pw, &ph)) {
        if (pw == 0 || ph == 0)
            return lmc_error(LMC_ERR_FORMAT, "%s: the image is %u x %u pixels (zero-sized)", what,
                             pw, ph);
        if ((uint64_t)pw * ph > LMC_IMAGE_MAX_PIXELS)
            return lmc_error(LMC_ERR_LIMIT,
                             "%s: the image is %u x %u pixels, over the limit of %u pixels", what,
                             pw, ph, (unsigned)LMC_IMAGE_MAX_PIXELS);
    }
    if (!stbi_info_from_memory(data, (int)size, &w, &h, &comp)) {
        const char *why = stbi_failure_reason();
        if (why && !strcmp(why, "0-pixel image"))
            return lmc_error(LMC_ERR_FORMAT, "%s: the image has zero width or height", what);
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: not a readable image (PNG, JPEG, BMP, GIF, TGA, PSD, HDR, PIC, "
                         "PNM): %s",
                         what, why ? why : "unknown format");
    }
    if (w <= 0 || h <= 0)
        return lmc_error(LMC_ERR_FORMAT, "%s: the image is %d x %d pixels (zero-sized)", what, w,
                         h);
    if ((uint64_t)w * (uint64_t)h > LMC_IMAGE_MAX_PIXELS)
        return lmc_error(LMC_ERR_LIMIT,
                         "%s: the image is %d x %d pixels, over the limit of %u pixels", what, w, h,
                         (unsigned)LMC_IMAGE_MAX_PIXELS);
    int w2 = 0, h2 = 0, c2 = 0;
    stbi_uc *px = stbi_load_from_memory(data, (int)size, &w2, &h2, &c2, 3);
    if (!px) {
        const char *why = stbi_failure_reason();
        bool oom = why && !strcmp(why, "outofmem");
        return lmc_error(oom ? LMC_ERR_NOMEM : LMC_ERR_FORMAT,
                         "%s: cannot decode the %d x %d image (truncated or corrupt): %s", what, w,
                         h, why ? why : "unknown error");
    }
    if (w2 != w || h2 != h) {
        stbi_image_free(px);
        return lmc_error(LMC_ERR_FORMAT, "%s: the image header says %d x %d but decodes to %d x %d",
                         what, w, h, w2, h2);
    }
    size_t n = (size_t)w * (size_t)h * 3;
    out->rgb = malloc(n);
    if (!out->rgb) {
        stbi_image_free(px);
        return lmc_error(LMC_ERR_NOMEM, "%s: out of memory for a %d x %d image", what, w, h);
    }
    memcpy(out->rgb, px, n); /* stb's buffer is freed with stbi_image_free, ours with free */
    stbi_image_free(px);
    out->width = w;
    out->height = h;
    return LMC_OK;
}

lmc_status lmc_image_load(const char *path, lmc_image *out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_load: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_load: path is NULL");
    if (lmc_dir_exists(path)) return lmc_error(LMC_ERR_IO, "%s: is a folder, not an image", path);
    lmc_mapped_file f;
    lmc_status st = lmc_map_file(path, &f);
    if (st != LMC_OK) return st;
    st = lmc_image_decode(f.data, f.size, path, out);
    lmc_unmap_file(&f);
    return st;
}
