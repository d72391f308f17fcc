#include "test.h"
int test_failures;
int main(void) { TEST_MAIN_END(); }
