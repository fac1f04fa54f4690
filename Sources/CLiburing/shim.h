// liburing for Swift. Only SalvoIO imports this module.
//
// liburing's helpers are `static inline` functions, which Swift imports as they are; the one thing
// Swift cannot cope with is the order of system headers: <sys/types.h> must come before <liburing.h>
// or Glibc's `fd_set` is defined twice.
#ifndef SALVO_CLIBURING_SHIM_H
#define SALVO_CLIBURING_SHIM_H

#include <sys/types.h>
#include <sys/eventfd.h>
#include <liburing.h>

#endif
