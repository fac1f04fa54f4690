#ifndef CSALVOHEX_H
#define CSALVOHEX_H

// A device token's 64 hex digits to its 32 bytes with SSE2, sixteen digits a step: the one piece of a token file's
// per-row path that Swift's own vector types did not compile to vector code (`SIMD16<UInt8>` ran at about a tenth
// of the speed of the 64-bit word loop `DeviceToken.decodeEightDigits` it would replace). Written by hand because
// it runs once per row of every send; every x86-64 processor has SSE2, and elsewhere the caller keeps its own loop.

#include <stdbool.h>
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define SALVO_HEX64_SSE2 1

/// Sixteen digits' values, one per byte; `invalid` gets 0xFF in the lane of any byte that is not a hex digit.
static inline __m128i salvo_hex16_values(__m128i text, __m128i *invalid) {
    const __m128i zero = _mm_setzero_si128();
    // A digit's value is text - '0' (0...9); a letter's, of either case, (text | 0x20) - 'a' (0...5) plus 10.
    // Unsigned "at most n" is a saturating subtract of n that leaves zero.
    __m128i digit = _mm_sub_epi8(text, _mm_set1_epi8('0'));
    __m128i isDigit = _mm_cmpeq_epi8(_mm_subs_epu8(digit, _mm_set1_epi8(9)), zero);
    __m128i letter = _mm_sub_epi8(_mm_or_si128(text, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
    __m128i isLetter = _mm_cmpeq_epi8(_mm_subs_epu8(letter, _mm_set1_epi8(5)), zero);
    *invalid = _mm_or_si128(*invalid, _mm_cmpeq_epi8(_mm_or_si128(isDigit, isLetter), zero));
    return _mm_or_si128(
        _mm_and_si128(isDigit, digit),
        _mm_andnot_si128(isDigit, _mm_add_epi8(letter, _mm_set1_epi8(10)))
    );
}

/// Sixteen digits' values to eight bytes, each in the low half of a 16-bit lane: the first digit of a pair is the
/// high nibble.
static inline __m128i salvo_hex16_pairs(__m128i values) {
    __m128i high = _mm_slli_epi16(values, 4);
    __m128i low = _mm_srli_epi16(values, 8);
    return _mm_and_si128(_mm_or_si128(high, low), _mm_set1_epi16(0x00FF));
}
#endif

/// Decodes the 64 hex digits of either case at `text` into the 32 bytes at `out`. False when any of them is not a
/// hex digit (`out` then holds no meaning) or when this processor has no SSE2 (`salvo_hex64_available`).
static inline bool salvo_decode_hex64(const uint8_t *text, uint8_t *out) {
#if defined(SALVO_HEX64_SSE2)
    __m128i invalid = _mm_setzero_si128();
    __m128i a = salvo_hex16_pairs(salvo_hex16_values(_mm_loadu_si128((const __m128i *)(text + 0)), &invalid));
    __m128i b = salvo_hex16_pairs(salvo_hex16_values(_mm_loadu_si128((const __m128i *)(text + 16)), &invalid));
    __m128i c = salvo_hex16_pairs(salvo_hex16_values(_mm_loadu_si128((const __m128i *)(text + 32)), &invalid));
    __m128i d = salvo_hex16_pairs(salvo_hex16_values(_mm_loadu_si128((const __m128i *)(text + 48)), &invalid));
    _mm_storeu_si128((__m128i *)(out + 0), _mm_packus_epi16(a, b));
    _mm_storeu_si128((__m128i *)(out + 16), _mm_packus_epi16(c, d));
    return _mm_movemask_epi8(invalid) == 0;
#else
    (void)text;
    (void)out;
    return false;
#endif
}

/// Whether `salvo_decode_hex64` decodes on this processor.
static inline bool salvo_hex64_available(void) {
#if defined(SALVO_HEX64_SSE2)
    return true;
#else
    return false;
#endif
}

#endif
