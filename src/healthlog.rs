//! The health log. (Skeleton.)
