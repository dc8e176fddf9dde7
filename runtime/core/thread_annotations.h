// Clang thread-safety annotations; no-ops on other compilers. They document which mutex
// guards which field even where the compiler cannot check it.
#pragma once

#if defined(__clang__)
#define TANDEM_TSA(x) __attribute__((x))
#else
#define TANDEM_TSA(x)
#endif

#define GUARDED_BY(x) TANDEM_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) TANDEM_TSA(pt_guarded_by(x))
#define REQUIRES(...) TANDEM_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) TANDEM_TSA(locks_excluded(__VA_ARGS__))
