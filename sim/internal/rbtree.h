/* rbtree.h: the models' ordered set, libbsd's red-black tree, and the two things memplay adds to it. */
#ifndef SIM_INTERNAL_RBTREE_H
#define SIM_INTERNAL_RBTREE_H

#include <bsd/sys/tree.h>

/*
 * Every ordered set in sim/ is a <bsd/sys/tree.h> red-black tree: RB_ENTRY links in the records
 * (inserting and removing never allocates), RB_NFIND for a lower bound, RB_MIN/RB_NEXT for the
 * walk. This header adds:
 *   SIM_RB_GENERATE(name, type, field, cmp)  the tree's functions, static to the file (libbsd's
 *       RB_GENERATE_STATIC spells "unused" as __unused, which it leaves undefined);
 *   name##_RB_SUBSTITUTE(head, x, y)  y (in no tree, sorting where x does) takes x's place;
 *   name##_RB_VALID(head)              1 when parent links, order and the red-black rules hold
 *       (the checks and the tests; O(n)).
 */
#define SIM_RB_GENERATE(name, type, field, cmp)                                                       \
  RB_GENERATE_INTERNAL(name, type, field, cmp, __attribute__((unused)) static)                        \
  __attribute__((unused)) static inline void name##_RB_SUBSTITUTE(struct name *head, struct type *x,  \
                                                                  struct type *y) {                   \
    struct type *p_ = RB_PARENT(x, field);                                                            \
    y->field = x->field;                                                                              \
    if (!p_) RB_ROOT(head) = y;                                                                       \
    else if (RB_LEFT(p_, field) == x) RB_LEFT(p_, field) = y;                                         \
    else RB_RIGHT(p_, field) = y;                                                                     \
    if (RB_LEFT(y, field)) RB_PARENT(RB_LEFT(y, field), field) = y;                                   \
    if (RB_RIGHT(y, field)) RB_PARENT(RB_RIGHT(y, field), field) = y;                                 \
    RB_LEFT(x, field) = RB_RIGHT(x, field) = RB_PARENT(x, field) = NULL;                              \
  }                                                                                                   \
  /* The black height of x's subtree; clears *ok at a broken link or a red node's red child. */       \
  __attribute__((unused)) static int name##_RB_BLACK_HEIGHT_(struct type *x, int *ok) {               \
    if (!x) return 1;                                                                                 \
    struct type *l_ = RB_LEFT(x, field), *r_ = RB_RIGHT(x, field);                                    \
    if ((l_ && RB_PARENT(l_, field) != x) || (r_ && RB_PARENT(r_, field) != x)) *ok = 0;              \
    if (RB_COLOR(x, field) == RB_RED &&                                                               \
        ((l_ && RB_COLOR(l_, field) == RB_RED) || (r_ && RB_COLOR(r_, field) == RB_RED)))             \
      *ok = 0;                                                                                        \
    int hl_ = name##_RB_BLACK_HEIGHT_(l_, ok), hr_ = name##_RB_BLACK_HEIGHT_(r_, ok);                 \
    if (hl_ != hr_) *ok = 0;                                                                          \
    return hl_ + (RB_COLOR(x, field) == RB_BLACK);                                                    \
  }                                                                                                   \
  __attribute__((unused)) static int name##_RB_VALID(struct name *head) {                             \
    int ok_ = 1;                                                                                      \
    struct type *root_ = RB_ROOT(head), *prev_ = NULL;                                                \
    if (root_ && (RB_PARENT(root_, field) || RB_COLOR(root_, field) != RB_BLACK)) ok_ = 0;            \
    name##_RB_BLACK_HEIGHT_(root_, &ok_);                                                             \
    for (struct type *x_ = RB_MIN(name, head); x_ && ok_; prev_ = x_, x_ = RB_NEXT(name, head, x_))   \
      if (prev_ && cmp(prev_, x_) >= 0) ok_ = 0;                                                      \
    return ok_;                                                                                       \
  }

#endif
