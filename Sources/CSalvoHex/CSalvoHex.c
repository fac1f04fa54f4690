// The decoder is header-only (static inline, so that Swift inlines it where rows are read); a target needs a source.
#include "CSalvoHex.h"
