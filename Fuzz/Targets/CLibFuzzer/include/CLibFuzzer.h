#ifndef SALVO_CLIBFUZZER_H
#define SALVO_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer), called from each target's main.swift. SwiftPM links
// an executable with `--defsym main=<Target>_main` and so needs the module's own entry point: libFuzzer's `main`
// is then never linked, and `-parse-as-library` (which drops the entry point) fails with an undefined
// `<Target>_main`. Swift cannot declare an external C function, hence this header.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
