/* avl.h: an intrusive AVL tree (ordered set) with lower_bound, generated per record type and order. */
#ifndef SIM_AVL_H
#define SIM_AVL_H

#include <stddef.h>

/*
 * The records carry their own links (SIM_AVL_LINK), so inserting and removing never allocates.
 * SIM_AVL_DEFINE(name, type, field, cmp) generates, for a tree head `struct name`:
 *   name_first(t), name_last(t), name_next(x), name_prev(x)  in-order walk (NULL at the ends)
 *   name_lower_bound(t, key)   the first record not less than key (key is a type*)
 *   name_insert(t, x)          0, or -1 when an equal record is already there
 *   name_remove(t, x)          x must be in t
 *   name_substitute(t, x, y)   y takes x's place (it must sort where x does)
 *   name_check(t)              1 when links, order and balance are consistent (tests, debug)
 * cmp(a, b) returns <0, 0 or >0. One record may sit in several trees through several links,
 * or in one of several trees that share a link (as the torch model's pools do).
 * Balance is the height of the right subtree minus the height of the left one.
 */
#define SIM_AVL_LINK(type)                                                           \
  struct {                                                                           \
    type *left, *right, *parent;                                                     \
    int balance;                                                                     \
    unsigned aux; /* not the tree's: the container's (fitset.h keeps a class here) */ \
  }

#define SIM_AVL_HEAD(name, type) \
  struct name {                  \
    type *root;                  \
  }

#define SIM_AVL_DEFINE(name, type, field, cmp)                                                            \
  static inline type *name##_first(const struct name *t) {                                                \
    type *x = t->root;                                                                                    \
    if (x)                                                                                                \
      while (x->field.left) x = x->field.left;                                                            \
    return x;                                                                                             \
  }                                                                                                       \
  static inline type *name##_last(const struct name *t) {                                                 \
    type *x = t->root;                                                                                    \
    if (x)                                                                                                \
      while (x->field.right) x = x->field.right;                                                          \
    return x;                                                                                             \
  }                                                                                                       \
  static inline type *name##_next(type *x) {                                                              \
    if (x->field.right) {                                                                                 \
      x = x->field.right;                                                                                 \
      while (x->field.left) x = x->field.left;                                                            \
      return x;                                                                                           \
    }                                                                                                     \
    type *p = x->field.parent;                                                                            \
    while (p && x == p->field.right) {                                                                    \
      x = p;                                                                                              \
      p = p->field.parent;                                                                                \
    }                                                                                                     \
    return p;                                                                                             \
  }                                                                                                       \
  static inline type *name##_prev(type *x) {                                                              \
    if (x->field.left) {                                                                                  \
      x = x->field.left;                                                                                  \
      while (x->field.right) x = x->field.right;                                                          \
      return x;                                                                                           \
    }                                                                                                     \
    type *p = x->field.parent;                                                                            \
    while (p && x == p->field.left) {                                                                     \
      x = p;                                                                                              \
      p = p->field.parent;                                                                                \
    }                                                                                                     \
    return p;                                                                                             \
  }                                                                                                       \
  static inline type *name##_lower_bound(const struct name *t, const type *key) {                         \
    type *x = t->root, *best = NULL;                                                                      \
    while (x) {                                                                                           \
      if (cmp(x, key) >= 0) {                                                                             \
        best = x;                                                                                         \
        x = x->field.left;                                                                                \
      } else {                                                                                            \
        x = x->field.right;                                                                               \
      }                                                                                                   \
    }                                                                                                     \
    return best;                                                                                          \
  }                                                                                                       \
  /* Puts y where x was under x's parent. */                                                              \
  static inline void name##_replace_(struct name *t, type *x, type *y) {                                  \
    type *p = x->field.parent;                                                                            \
    if (!p) t->root = y;                                                                                  \
    else if (p->field.left == x) p->field.left = y;                                                       \
    else p->field.right = y;                                                                              \
    if (y) y->field.parent = p;                                                                           \
  }                                                                                                       \
  static inline type *name##_rotate_left_(struct name *t, type *x) {                                      \
    type *y = x->field.right;                                                                             \
    x->field.right = y->field.left;                                                                       \
    if (y->field.left) y->field.left->field.parent = x;                                                   \
    name##_replace_(t, x, y);                                                                             \
    y->field.left = x;                                                                                    \
    x->field.parent = y;                                                                                  \
    return y;                                                                                             \
  }                                                                                                       \
  static inline type *name##_rotate_right_(struct name *t, type *x) {                                     \
    type *y = x->field.left;                                                                              \
    x->field.left = y->field.right;                                                                       \
    if (y->field.right) y->field.right->field.parent = x;                                                 \
    name##_replace_(t, x, y);                                                                             \
    y->field.right = x;                                                                                   \
    x->field.parent = y;                                                                                  \
    return y;                                                                                             \
  }                                                                                                       \
  /* Rebalances p (balance +-2, heavy child c); returns the subtree's new root. */                        \
  static inline type *name##_fix_(struct name *t, type *p) {                                              \
    if (p->field.balance < 0) {                                                                           \
      type *c = p->field.left;                                                                            \
      if (c->field.balance <= 0) {                                                                        \
        name##_rotate_right_(t, p);                                                                       \
        if (c->field.balance == 0) {                                                                      \
          p->field.balance = -1;                                                                          \
          c->field.balance = 1;                                                                           \
        } else {                                                                                          \
          p->field.balance = 0;                                                                           \
          c->field.balance = 0;                                                                           \
        }                                                                                                 \
        return c;                                                                                         \
      }                                                                                                   \
      type *g = c->field.right;                                                                           \
      name##_rotate_left_(t, c);                                                                          \
      name##_rotate_right_(t, p);                                                                         \
      p->field.balance = g->field.balance < 0 ? 1 : 0;                                                    \
      c->field.balance = g->field.balance > 0 ? -1 : 0;                                                   \
      g->field.balance = 0;                                                                               \
      return g;                                                                                           \
    } else {                                                                                              \
      type *c = p->field.right;                                                                           \
      if (c->field.balance >= 0) {                                                                        \
        name##_rotate_left_(t, p);                                                                        \
        if (c->field.balance == 0) {                                                                      \
          p->field.balance = 1;                                                                           \
          c->field.balance = -1;                                                                          \
        } else {                                                                                          \
          p->field.balance = 0;                                                                           \
          c->field.balance = 0;                                                                           \
        }                                                                                                 \
        return c;                                                                                         \
      }                                                                                                   \
      type *g = c->field.left;                                                                            \
      name##_rotate_right_(t, c);                                                                         \
      name##_rotate_left_(t, p);                                                                          \
      p->field.balance = g->field.balance > 0 ? -1 : 0;                                                   \
      c->field.balance = g->field.balance < 0 ? 1 : 0;                                                    \
      g->field.balance = 0;                                                                               \
      return g;                                                                                           \
    }                                                                                                     \
  }                                                                                                       \
  static inline int name##_insert(struct name *t, type *x) {                                              \
    type *p = NULL, **slot = &t->root;                                                                    \
    while (*slot) {                                                                                       \
      p = *slot;                                                                                          \
      int c_ = cmp(x, p);                                                                                 \
      if (c_ == 0) return -1;                                                                             \
      slot = c_ < 0 ? &p->field.left : &p->field.right;                                                   \
    }                                                                                                     \
    x->field.left = x->field.right = NULL;                                                                \
    x->field.parent = p;                                                                                  \
    x->field.balance = 0;                                                                                 \
    *slot = x;                                                                                            \
    for (type *c = x; p; c = p, p = p->field.parent) {                                                    \
      p->field.balance += c == p->field.left ? -1 : 1;                                                    \
      if (p->field.balance == 0) break;                                                                   \
      if (p->field.balance == 1 || p->field.balance == -1) continue;                                      \
      name##_fix_(t, p);                                                                                  \
      break;                                                                                              \
    }                                                                                                     \
    return 0;                                                                                             \
  }                                                                                                       \
  static inline void name##_remove(struct name *t, type *x) {                                             \
    if (x->field.left && x->field.right) {                                                                \
      /* Swap x with its successor s (which has no left child), links and balance. */                     \
      type *s = x->field.right;                                                                           \
      while (s->field.left) s = s->field.left;                                                            \
      int b = s->field.balance;                                                                           \
      s->field.balance = x->field.balance;                                                                \
      x->field.balance = b;                                                                               \
      type *sr = s->field.right;                                                                          \
      s->field.left = x->field.left;                                                                      \
      s->field.left->field.parent = s;                                                                    \
      if (s == x->field.right) {                                                                          \
        name##_replace_(t, x, s);                                                                         \
        s->field.right = x;                                                                               \
        x->field.parent = s;                                                                              \
      } else {                                                                                            \
        type *sp = s->field.parent;                                                                       \
        s->field.right = x->field.right;                                                                  \
        s->field.right->field.parent = s;                                                                 \
        name##_replace_(t, x, s);                                                                         \
        sp->field.left = x;                                                                               \
        x->field.parent = sp;                                                                             \
      }                                                                                                   \
      x->field.left = NULL;                                                                               \
      x->field.right = sr;                                                                                \
      if (sr) sr->field.parent = x;                                                                       \
    }                                                                                                     \
    type *child = x->field.left ? x->field.left : x->field.right, *p = x->field.parent;                  \
    int left = p && p->field.left == x;                                                                   \
    name##_replace_(t, x, child);                                                                         \
    while (p) {                                                                                           \
      p->field.balance += left ? 1 : -1;                                                                  \
      if (p->field.balance == 1 || p->field.balance == -1) break;                                         \
      if (p->field.balance != 0) {                                                                        \
        int was_zero = (p->field.balance > 0 ? p->field.right : p->field.left)->field.balance == 0;       \
        p = name##_fix_(t, p);                                                                            \
        if (was_zero) break; /* the subtree kept its height */                                            \
      }                                                                                                   \
      type *q = p->field.parent;                                                                          \
      if (!q) break;                                                                                      \
      left = q->field.left == p;                                                                          \
      p = q;                                                                                              \
    }                                                                                                     \
    x->field.left = x->field.right = x->field.parent = NULL;                                              \
  }                                                                                                       \
  /* Puts y (not in the tree) where x is, and takes x out: y must sort where x did. */                  \
  static inline void name##_substitute(struct name *t, type *x, type *y) {                                \
    y->field = x->field;                                                                                  \
    name##_replace_(t, x, y);                                                                             \
    if (y->field.left) y->field.left->field.parent = y;                                                   \
    if (y->field.right) y->field.right->field.parent = y;                                                 \
    x->field.left = x->field.right = x->field.parent = NULL;                                              \
  }                                                                                                       \
  static inline int name##_height_(type *x, int *ok) {                                                    \
    if (!x) return 0;                                                                                     \
    if ((x->field.left && x->field.left->field.parent != x) ||                                            \
        (x->field.right && x->field.right->field.parent != x))                                            \
      *ok = 0;                                                                                            \
    if ((x->field.left && cmp(x->field.left, x) >= 0) || (x->field.right && cmp(x->field.right, x) <= 0)) \
      *ok = 0;                                                                                            \
    int hl = name##_height_(x->field.left, ok), hr = name##_height_(x->field.right, ok);                 \
    if (hr - hl != x->field.balance || hr - hl > 1 || hl - hr > 1) *ok = 0;                               \
    return 1 + (hl > hr ? hl : hr);                                                                       \
  }                                                                                                       \
  static inline int name##_check(const struct name *t) {                                                  \
    int ok = 1;                                                                                           \
    if (t->root && t->root->field.parent) ok = 0;                                                         \
    name##_height_(t->root, &ok);                                                                         \
    type *prev = NULL;                                                                                    \
    for (type *x = name##_first(t); x && ok; x = name##_next(x)) {                                        \
      if (prev && cmp(prev, x) >= 0) ok = 0;                                                              \
      prev = x;                                                                                           \
    }                                                                                                     \
    return ok;                                                                                            \
  }

#endif
