/* test.h: assertions for memplay's tests: each failure prints file, line, the expression and values. */
#ifndef TESTS_TEST_H
#define TESTS_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int test_failures;

#define TEST_SKIP 77 /* CTest's SKIP_RETURN_CODE */

#define CHECK(expr)                                                               \
  do {                                                                            \
    if (!(expr)) {                                                                \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);     \
      test_failures++;                                                            \
    }                                                                             \
  } while (0)

#define CHECK_EQ(a, b)                                                                                      \
  do {                                                                                                      \
    long long a_ = (long long)(a), b_ = (long long)(b);                                                     \
    if (a_ != b_) {                                                                                         \
      fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, a_, b_); \
      test_failures++;                                                                                      \
    }                                                                                                       \
  } while (0)

#define CHECK_STR(a, b)                                                                                     \
  do {                                                                                                      \
    const char *a_ = (a), *b_ = (b);                                                                        \
    if (!a_ || !b_ || strcmp(a_, b_)) {                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__, __LINE__, #a, #b,     \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                                      \
      test_failures++;                                                                                      \
    }                                                                                                       \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                               \
  do {                                                                                                      \
    double a_ = (double)(a), b_ = (double)(b);                                                              \
    if (!(a_ - b_ <= (tol) && b_ - a_ <= (tol))) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s ~= %s (%g vs %g)\n", __FILE__, __LINE__, #a, #b, a_, b_);   \
      test_failures++;                                                                                      \
    }                                                                                                       \
  } while (0)

/* Runs a named test function and reports it. */
#define RUN(fn)                                  \
  do {                                           \
    int before_ = test_failures;                 \
    fn();                                        \
    fprintf(stderr, "%s %s\n", test_failures == before_ ? "ok  " : "FAIL", #fn); \
  } while (0)

#define TEST_MAIN_END() return test_failures ? 1 : 0

#endif
