//! Map every probe outcome to a DESIGN.md failure type. (Skeleton.)
