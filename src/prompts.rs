//! The probe prompt pool. (Skeleton: the helper replaces this file.)

use std::path::Path;

use crate::error::Result;

/// One question, ready to send, with the answer that passes.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The full prompt, ending with "Reply with only the number."
    pub text: String,
    pub expected: i64,
}

#[derive(Debug, Clone)]
pub struct Pool {}

impl Pool {
    pub fn embedded() -> Pool {
        Pool {}
    }

    pub fn load(_path: &Path) -> Result<Pool> {
        Ok(Pool {})
    }

    pub fn draw(&self, _rng: &mut impl rand::Rng) -> Question {
        Question {
            text: "What is 7 + 7? Reply with only the number.".into(),
            expected: 14,
        }
    }

    /// The expected answer of a prompt drawn from this pool (for the fake provider).
    pub fn solve(&self, _prompt: &str) -> Option<i64> {
        Some(14)
    }
}

/// Whether `reply` answers `expected` (DESIGN.md, "Probes").
pub fn check_answer(reply: &str, expected: i64) -> bool {
    reply.trim() == expected.to_string()
}
