//! The three wire dialects. (Skeleton: the helper fills this in.)
