// glibc's allocator settings (malloc.h), which Swift's Glibc module does not export.
#pragma once

/// Keeps up to `trim` bytes free at the top of each heap instead of returning them to the
/// kernel, and maps allocations of `mmap` bytes and more on their own. Does nothing where the C
/// library is not glibc.
void passkeyd_tune_allocator(int trim, int mmap);
