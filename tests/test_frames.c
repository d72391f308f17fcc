/* test_frames.c: the frames reports hide (PyTorch memory_viz's filter) and the frame they name for a stack. */
#include "io/frames.h"
#include "test.h"

int test_failures;

static void hides_unwinder_and_interpreter(void) {
  CHECK(frames_hidden("torch::unwind::unwind()", "??"));
  CHECK(frames_hidden("torch::CapturedTraceback::gather(bool, bool, bool)", "??"));
  CHECK(frames_hidden("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"));
  CHECK(frames_hidden("_PyEval_EvalFrameDefault", "Python/bytecodes.c"));
  CHECK(frames_hidden("_PyObject_MakeTpCall", "Objects/call.c"));
  CHECK(frames_hidden("cfunction_call", "/usr/local/src/conda/python-3.12.3/Objects/methodobject.c"));
  CHECK(frames_hidden("run_mod", "Python/pythonrun.c"));
  CHECK(frames_hidden("Py_BytesMain", "/usr/local/src/conda/python-3.12.3/Modules/main.c"));
  CHECK(frames_hidden("__libc_start_main", "??"));
  CHECK(frames_hidden("at::(anonymous namespace)::wrapper_CUDA_bmm", "build/aten/src/ATen/RegisterCUDA.cpp"));
  CHECK(frames_hidden("c10::impl::wrap_kernel_functor_unboxed_<...>::call", "c10/core/boxing/impl/x.h"));
  CHECK(!frames_hidden("custom_softmax", "/home/me/train.py"));
  CHECK(!frames_hidden("forward", "/usr/lib/python3/site-packages/torch/nn/modules/linear.py"));
  CHECK(!frames_hidden("at::native::einsum(...)", "Linear.cpp"));
  CHECK(!frames_hidden(NULL, NULL));
}

/* Frames innermost first, as stores give them; returns the index frames_pick names. */
static int pick(const char *const (*f)[2], int n) {
  frames_pick p;
  frames_pick_init(&p);
  for (int i = 0; i < n && !frames_pick_offer(&p, f[i][0], f[i][1]); i++) {}
  return frames_pick_result(&p);
}

static void names_the_first_user_frame(void) {
  static const char *const fwd[][2] = {
    {"torch::unwind::unwind()", "??"},
    {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "CUDACachingAllocator.cpp"},
    {"_PyEval_EvalFrameDefault", "Python/bytecodes.c"},
    {"einsum", "/venv/lib/python3.12/site-packages/torch/functional.py"},
    {"custom_softmax", "/home/me/attn.py"},
    {"main", "/home/me/attn.py"},
  };
  CHECK_EQ(pick(fwd, 6), 4);
  static const char *const library_only[][2] = {
    {"torch::unwind::unwind()", "??"},
    {"forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"},
  };
  CHECK_EQ(pick(library_only, 2), 1);
  /* the backward pass: no Python frames; its autograd node names the operator */
  static const char *const bwd[][2] = {
    {"torch::unwind::unwind()", "??"},
    {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "CUDACachingAllocator.cpp"},
    {"torch::autograd::generated::DivBackward0::apply(std::vector<at::Tensor>&&)", ""},
    {"torch::autograd::Engine::thread_main", ""},
  };
  CHECK_EQ(pick(bwd, 4), 2);
  static const char *const cxx[][2] = {{"torch::unwind::unwind()", "??"}, {"at::native::empty_cuda", "x.cpp"}};
  CHECK_EQ(pick(cxx, 2), 1);
  static const char *const hidden[][2] = {{"torch::unwind::unwind()", "??"}};
  CHECK_EQ(pick(hidden, 1), 0);
  CHECK_EQ(pick(hidden, 0), -1);
}

int main(void) {
  RUN(hides_unwinder_and_interpreter);
  RUN(names_the_first_user_frame);
  TEST_MAIN_END();
}
