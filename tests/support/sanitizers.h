// Whether this test binary (and so the server, built the same way) runs under a sanitizer, for
// tests that scale their load or leave latency unjudged there. GCC says so with
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; Clang 14, which builds build-asan/, only through
// __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_TEST_ASAN 1
#endif
#endif
#ifndef SLUICE_TEST_ASAN
#define SLUICE_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define SLUICE_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TEST_TSAN 1
#endif
#endif
#ifndef SLUICE_TEST_TSAN
#define SLUICE_TEST_TSAN 0
#endif

#define SLUICE_TEST_SANITIZED (SLUICE_TEST_ASAN || SLUICE_TEST_TSAN)
