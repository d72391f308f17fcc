/* unloadable_recorder.c: a recorder library that cannot be loaded, for tests/gpu/test_fake.sh: it
 * exports InitializeInjection, but needs a symbol that nothing defines (as the real recorder once
 * did), so that loading it with every symbol bound fails. */
void memplay_test_symbol_nothing_defines(void);

__attribute__((visibility("default"))) int InitializeInjection(void);

int InitializeInjection(void) {
  memplay_test_symbol_nothing_defines();
  return 1;
}
