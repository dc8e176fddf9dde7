// A broken plugin for actor_test: it calls a function that nothing defines, so loading it
// with every symbol resolved at once must fail with a clear error.
extern "C" int tandem_test_symbol_that_does_not_exist(int x);

extern "C" int tandem_test_plugin_entry(int x) { return tandem_test_symbol_that_does_not_exist(x); }
