#include "CAllocator.h"

#include <stdlib.h>  // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

void passkeyd_tune_allocator(int trim, int mmap) {
#if defined(__GLIBC__)
    mallopt(M_TRIM_THRESHOLD, trim);
    mallopt(M_MMAP_THRESHOLD, mmap);
#else
    (void)trim;
    (void)mmap;
#endif
}
