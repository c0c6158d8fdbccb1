#pragma once
// BLAS pinned to one thread on the calling thread, for CPU kernels whose rows already
// run inside at::parallel_for.
//
// LibTorch turns MKL's dynamic thread adjustment off, so an MKL call inside a parallel
// region would otherwise start threads of its own on top of the region's (measured:
// 10x slower on 2 busy cores). MKL's per-thread setter is looked up at run time (the
// PyPI wheel links MKL statically and exports its C interface; mkl_service.h maps
// mkl_set_num_threads_local to MKL_Set_Num_Threads_Local, the lower-case symbol is the
// Fortran one taking a pointer); with any other BLAS the guard does nothing.

#include <dlfcn.h>

namespace sb {

class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : setter_(setter_or_null()) {
    if (setter_) previous_ = setter_(1);
  }
  ~SingleThreadedBlas() {
    if (setter_) setter_(previous_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  using Setter = int (*)(int);
  static Setter setter_or_null() {
    static const auto setter = reinterpret_cast<Setter>(dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
    return setter;
  }

  Setter setter_;
  int previous_ = 0;
};

}  // namespace sb
