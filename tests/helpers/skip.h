/* Skipping a test says so and why: "SKIPPED: <reason>" on stdout, which
 * ctest --output-on-failure and the test log show. Include after cmocka.h. */
#ifndef LMC_TEST_SKIP_H
#define LMC_TEST_SKIP_H

#include <stdio.h>
#include <stdlib.h>

#define TEST_SKIP(...)                                                                             \
    do {                                                                                           \
        printf("SKIPPED: ");                                                                       \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
        skip();                                                                                    \
    } while (0)

/* Data that CI always has (CI is set there): missing it fails under CI and
 * skips, saying so, elsewhere. */
#define TEST_SKIP_UNLESS_CI(...)                                                                   \
    do {                                                                                           \
        if (getenv("CI") && *getenv("CI")) {                                                       \
            printf("FAILED (CI): ");                                                               \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            fail_msg("required data missing under CI");                                            \
        }                                                                                          \
        TEST_SKIP(__VA_ARGS__);                                                                    \
    } while (0)

#endif
