#ifndef C_POOL_HOLD_H
#define C_POOL_HOLD_H

#include <stdbool.h>

/// Whether this process runs every job of Swift's global concurrent executor on one thread of its own (the
/// environment's SALVO_TEST_ONE_POOL_THREAD=1 when the test binary was loaded): the cooperative pool held to one
/// thread, so that a test or a product path that blocks a pool thread stalls everything and is found.
bool salvo_pool_held_to_one_thread(void);

#endif
