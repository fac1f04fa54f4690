// The header declares libFuzzer's driver; a C target needs one source file.
#include "CLibFuzzer.h"
