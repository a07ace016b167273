/* Text helpers shared by the tokenizer, the template engine and the JSON
 * writer: one UTF-8 codec and one Python float repr. */
#ifndef LMC_BASE_TEXT_H
#define LMC_BASE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* UTF-8 as Unicode defines it (table 3-7 of ch. 3): no overlong forms, no
 * surrogates, nothing above U+10FFFF. */

/* Length of the well-formed sequence at s[0..n), or 0 when it is not one;
 * then *bad (if not NULL) receives the length of its maximal invalid subpart
 * (what Rust's Utf8Chunks and Python's errors="replace" turn into one
 * U+FFFD). n must be at least 1. */
size_t lmc_utf8_sequence(const char *s, size_t n, size_t *bad);
/* Decodes the code point at s[0..n), n >= 1: returns its length, or 1 with
 * *cp = U+FFFD at an invalid byte. */
size_t lmc_utf8_decode(const char *s, size_t n, int32_t *cp);
/* Encodes cp (U+FFFD for surrogates and values out of range); returns 1-4. */
size_t lmc_utf8_encode(int32_t cp, char out[4]);
/* Length of the longest well-formed prefix of s[0..n). */
size_t lmc_utf8_valid_prefix(const char *s, size_t n);
/* Number of code points in s[0..n), each invalid byte counting as one. */
size_t lmc_utf8_length(const char *s, size_t n);

/* Python's repr(float): the shortest digits that read back to x, positional
 * for exponents -4..15 ("0.0001", "1e+16", "1.5", "-0.0", "100.0"), and
 * "nan", "inf", "-inf". */
enum { LMC_FLOAT_REPR_MAX = 32 };
void lmc_float_repr(double x, char out[LMC_FLOAT_REPR_MAX]);

#endif
