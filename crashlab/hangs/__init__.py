"""A hang across ranks: what a capture holds (layout), how it is read (the rank-by-rank
reading and the verdict across ranks)."""
