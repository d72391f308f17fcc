/* alloc_torch.h: what `memplay validate` asks of the torch model beyond the allocator interface. */
#ifndef SIM_ALLOC_TORCH_H
#define SIM_ALLOC_TORCH_H

#include <stdint.h>

#include "allocator.h" /* declares sim_torch_ops */

/* round_size(): the bytes a request of `size` occupies before any unsplit remainder. */
uint64_t sim_torch_round_size(void *ctx, uint64_t size);
/* Whether get_free_block() would find a cached block for this request now; changes nothing. */
int sim_torch_would_reuse(void *ctx, uint64_t size, int64_t stream);


#endif
