/* src/vision against transformers: pixel values of 9 images (PNG RGB, gray,
 * RGBA, palette, 1x1, and PIL's decoded pixels of two JPEGs) through
 * transformers 5.17's SiglipImageProcessor (torchvision backend,
 * tests/fixtures/vlm/pixels) and 8 of them through SiglipImageProcessorPil
 * (PIL, as transformers 4; pixels-pil), made by
 * tests/reference/make_vlm_fixtures.py: max abs difference <= 1e-6.
 * stb_image's JPEG decoder against PIL's (libjpeg) on the same files:
 * reported, bounded. Bad images (truncated PNG, zero width, a 100000 x
 * 100000 header, a text file named .png, an empty file, a folder, a missing
 * file): one clear error each, no crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/json.h"
#include "vision/vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VLM_DIR LMC_SOURCE_DIR "/tests/fixtures/vlm"

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)size);
    assert_non_null(v);
    assert_int_equal(fread(v, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size / 4;
    return v;
}

static void check_pixels(const char *set, lmc_resize_backend backend, int min_png) {
    json_t *j = NULL;
    char list[512];
    snprintf(list, sizeof list, VLM_DIR "/%s/pixels.json", set);
    assert_int_equal(lmc_json_load_file(list, &j), LMC_OK);
    json_t *cases = json_object_get(j, "cases");
    assert_true(json_array_size(cases) >= 5);
    size_t i;
    json_t *c;
    int png = 0, jpeg = 0;
    json_array_foreach(cases, i, c) {
        const char *image = json_string_value(json_object_get(c, "image"));
        char path[512], ref_path[512];
        snprintf(path, sizeof path, VLM_DIR "/images/%s", image);
        snprintf(ref_path, sizeof ref_path, VLM_DIR "/%s/%s", set,
                 json_string_value(json_object_get(c, "file")));
        lmc_image_processor p;
        assert_int_equal(
            lmc_image_processor_parse(json_object_get(c, "preprocessor"), "pixels.json", &p),
            LMC_OK);
        assert_int_equal(p.backend, backend);
        lmc_image im;
        lmc_status st = lmc_image_load(path, &im);
        assert_int_equal(st, LMC_OK);
        int32_t h, w;
        lmc_image_processor_output_size(&p, &im, &h, &w);
        size_t n = 0;
        float *ref = read_f32(ref_path, &n);
        assert_int_equal(n, (size_t)3 * (size_t)h * (size_t)w);
        float *got = malloc(n * sizeof *got);
        assert_int_equal(lmc_image_preprocess(&p, &im, got), LMC_OK);
        double worst = 0;
        size_t bad = 0;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)got[k] - ref[k]);
            worst = d > worst ? d : worst;
            bad += d > 1e-6;
        }
        printf("  %-28s %4d x %-4d -> %3d x %-3d max |diff| %.3g (%zu of %zu over 1e-6)\n",
               json_string_value(json_object_get(c, "case")), im.width, im.height, w, h, worst, bad,
               n);
        assert_true(worst <= 1e-6);
        if (strstr(image, ".jpg"))
            jpeg++;
        else
            png++;
        free(got);
        free(ref);
        lmc_image_free(&im);
    }
    assert_true(png >= min_png && jpeg >= 2);
    json_decref(j);
}

/* transformers 5's default SiglipImageProcessor (torchvision backend) */
static void test_pixels_match_transformers(void **state) {
    (void)state;
    check_pixels("pixels", LMC_RESIZE_TORCH, 6);
}

/* SiglipImageProcessorPil (PIL's Image.resize; transformers 4's processor) */
static void test_pixels_match_transformers_pil(void **state) {
    (void)state;
    check_pixels("pixels-pil", LMC_RESIZE_PIL, 5);
}

/* stb_image decodes JPEG with its own IDCT and chroma upsampling; PIL uses
 * libjpeg. The same file gives slightly different pixels: measured here. */
static void test_jpeg_decoders(void **state) {
    (void)state;
    const char *names[] = {"photo-320x240.jpg", "photo444-233x151.jpg", "model-b-100x80.jpg"};
    for (size_t i = 0; i < 3; i++) {
        char a[512], b[512];
        snprintf(a, sizeof a, VLM_DIR "/images/%s", names[i]);
        snprintf(b, sizeof b, VLM_DIR "/images/%s.pil.png", names[i]);
        lmc_image x, y;
        assert_int_equal(lmc_image_load(a, &x), LMC_OK);
        assert_int_equal(lmc_image_load(b, &y), LMC_OK);
        assert_int_equal(x.width, y.width);
        assert_int_equal(x.height, y.height);
        size_t n = (size_t)x.width * (size_t)x.height * 3, differ = 0;
        int worst = 0;
        double sum = 0;
        for (size_t k = 0; k < n; k++) {
            int d = abs((int)x.rgb[k] - (int)y.rgb[k]);
            worst = d > worst ? d : worst;
            differ += d != 0;
            sum += d;
        }
        printf("  %-22s stb vs PIL: max |diff| %d, mean %.3f, %.1f%% of values differ\n", names[i],
               worst, sum / (double)n, 100.0 * (double)differ / (double)n);
        assert_true(worst <= 16 && sum / (double)n < 1.0);
        lmc_image_free(&x);
        lmc_image_free(&y);
    }
}

/* A PNG: signature, IHDR (width, height, 8-bit RGB), an IDAT of `idat`
 * bytes (zeros), IEND; CRCs are not checked by stb. */
static size_t make_png(uint8_t *buf, uint32_t w, uint32_t h) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t o = 0;
    memcpy(buf, sig, 8);
    o = 8;
    const uint8_t ihdr[] = {0,
                            0,
                            0,
                            13,
                            'I',
                            'H',
                            'D',
                            'R',
                            (uint8_t)(w >> 24),
                            (uint8_t)(w >> 16),
                            (uint8_t)(w >> 8),
                            (uint8_t)w,
                            (uint8_t)(h >> 24),
                            (uint8_t)(h >> 16),
                            (uint8_t)(h >> 8),
                            (uint8_t)h,
                            8,
                            2,
                            0,
                            0,
                            0,
                            0,
                            0,
                            0,
                            0};
    memcpy(buf + o, ihdr, sizeof ihdr);
    o += sizeof ihdr;
    const uint8_t tail[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    memcpy(buf + o, tail, sizeof tail);
    return o + sizeof tail;
}

static void expect_error(const uint8_t *data, size_t n, lmc_status want, const char *needle) {
    lmc_image im;
    lmc_status st = lmc_image_decode(data, n, "bad.png", &im);
    printf("  -> %s: %s\n", lmc_status_string(st), lmc_last_error());
    assert_int_equal(st, want);
    assert_null(im.rgb);
    assert_non_null(strstr(lmc_last_error(), needle));
    assert_non_null(strstr(lmc_last_error(), "bad.png"));
}

static void test_bad_images(void **state) {
    (void)state;
    /* truncated: the first half of a real PNG */
    lmc_mapped_file f;
    assert_int_equal(lmc_map_file(VLM_DIR "/images/rgb-300x200.png", &f), LMC_OK);
    expect_error(f.data, f.size / 2, LMC_ERR_FORMAT, "truncated or corrupt");
    expect_error(f.data, 40, LMC_ERR_FORMAT, "truncated or corrupt");
    lmc_unmap_file(&f);
    uint8_t png[128];
    /* zero width */
    size_t n = make_png(png, 0, 16);
    expect_error(png, n, LMC_ERR_FORMAT, "zero");
    /* a 100000 x 100000 header: refused before decoding */
    n = make_png(png, 100000, 100000);
    expect_error(png, n, LMC_ERR_LIMIT, "100000 x 100000");
    /* text named .png */
    const char *text = "this is not an image, just text in a file named .png\n";
    expect_error((const uint8_t *)text, strlen(text), LMC_ERR_FORMAT, "not a readable image");
    expect_error((const uint8_t *)"", 0, LMC_ERR_FORMAT, "empty");
    /* through files */
    char dir[] = "/tmp/lmc_test_vision_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/notes.png", dir);
    FILE *t = fopen(path, "w");
    fputs(text, t);
    fclose(t);
    lmc_image im;
    assert_int_equal(lmc_image_load(path, &im), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "notes.png"));
    assert_int_equal(lmc_image_load(dir, &im), LMC_ERR_IO);
    snprintf(path, sizeof path, "%s/missing.png", dir);
    assert_int_equal(lmc_image_load(path, &im), LMC_ERR_IO);
    assert_non_null(strstr(lmc_last_error(), "missing.png"));
    unlink(dir); /* best effort */
    snprintf(path, sizeof path, "%s/notes.png", dir);
    unlink(path);
    rmdir(dir);
}

/* Resize: the identity, and shrinking/growing keep a flat image flat
 * (weights sum to one in fixed point too), both backends. */
static void test_resize_basics(void **state) {
    (void)state;
    lmc_image im = {37, 23, malloc(37 * 23 * 3)};
    for (size_t k = 0; k < 37 * 23 * 3; k++) im.rgb[k] = (uint8_t)(k % 3 == 0 ? 200 : 17);
    for (int b = 0; b < 2; b++) {
        int sizes[][2] = {{37, 23}, {5, 3}, {100, 61}, {1, 1}, {37, 80}};
        for (size_t i = 0; i < 5; i++) {
            lmc_image out;
            assert_int_equal(lmc_image_resize(&im, sizes[i][0], sizes[i][1], LMC_RESAMPLE_BICUBIC,
                                              (lmc_resize_backend)b, &out),
                             LMC_OK);
            for (size_t k = 0; k < (size_t)out.width * (size_t)out.height * 3; k++)
                assert_int_equal(out.rgb[k], k % 3 == 0 ? 200 : 17);
            lmc_image_free(&out);
        }
    }
    lmc_image out;
    assert_int_equal(lmc_image_resize(&im, 0, 5, LMC_RESAMPLE_BICUBIC, LMC_RESIZE_PIL, &out),
                     LMC_ERR_INVALID_ARG);
    assert_int_equal(lmc_image_resize(&im, 5, 5, 1, LMC_RESIZE_PIL, &out), LMC_ERR_UNSUPPORTED);
    lmc_image_free(&im);
}

static void test_processor_config(void **state) {
    (void)state;
    lmc_image_processor p;
    json_error_t e;
    json_t *j = json_loads("{\"size\": {\"height\": 448, \"width\": 448}, \"resample\": 3, "
                           "\"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5], "
                           "\"rescale_factor\": 0.00392156862745098, \"image_seq_length\": 1024, "
                           "\"image_processor_type\": \"SiglipImageProcessor\"}",
                           0, &e);
    assert_int_equal(lmc_image_processor_parse(j, "x", &p), LMC_OK);
    assert_int_equal(p.height, 448);
    assert_int_equal(p.image_seq_length, 1024);
    assert_int_equal(p.backend, LMC_RESIZE_TORCH);
    json_object_set_new(j, "image_processor_type", json_string("SiglipImageProcessorPil"));
    assert_int_equal(lmc_image_processor_parse(j, "x", &p), LMC_OK);
    assert_int_equal(p.backend, LMC_RESIZE_PIL);
    json_object_set_new(j, "resample", json_integer(1));
    assert_int_equal(lmc_image_processor_parse(j, "x", &p), LMC_ERR_UNSUPPORTED);
    json_object_set_new(j, "resample", json_integer(3));
    json_object_set_new(j, "image_std", json_pack("[f, f, f]", 0.5, 0.0, 0.5));
    assert_int_equal(lmc_image_processor_parse(j, "x", &p), LMC_ERR_FORMAT);
    json_object_set_new(j, "image_std", json_string("wide"));
    assert_int_equal(lmc_image_processor_parse(j, "x", &p), LMC_ERR_FORMAT);
    json_decref(j);
    assert_int_equal(lmc_image_processor_load("/nonexistent", &p), LMC_ERR_NOT_FOUND);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pixels_match_transformers),
        cmocka_unit_test(test_pixels_match_transformers_pil),
        cmocka_unit_test(test_jpeg_decoders),
        cmocka_unit_test(test_bad_images),
        cmocka_unit_test(test_resize_basics),
        cmocka_unit_test(test_processor_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
