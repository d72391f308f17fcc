/* allocators.c: the registry of allocator models, in the order `memplay help replay` lists them. */
#include <stddef.h>

#include "allocator.h"

const sim_allocator_ops *const sim_allocators[] = {
  &sim_ideal_ops,
  &sim_cuda_ops,
  &sim_torch_ops,
  &sim_bfc_ops,
  &sim_async_ops,
  NULL,
};
