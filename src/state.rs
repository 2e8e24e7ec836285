//! Model states. (Skeleton.)
