// A shared object that is not the CUDA backend module: no entry point.
extern "C" __attribute__((visibility("default"))) int remat_something_else() { return 0; }
