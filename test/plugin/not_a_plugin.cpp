// A shared library that exports no mstep_plugin_init: load_plugin refuses
// it as "not an mstep plugin".
extern "C" int mstep_not_a_plugin_marker() { return 42; }
