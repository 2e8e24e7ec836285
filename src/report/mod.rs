//! What the read commands show: `rollup`'s and `brief`'s reports, and what
//! `state` and `brief` show of a model's capabilities ([`capview`]) and of
//! a paused model's next re-probe ([`nextprobe`]). The figures come from
//! [`crate::healthlog`]; the command files in `cmd/` check the flags, read
//! the files and call these. `state` and `brief` share their `--provider`
//! filter ([`ProviderFilter`]).

pub mod brief;
pub mod capview;
pub mod nextprobe;
pub mod rollup;

use crate::catalog::{Catalog, ModelKey};
use crate::error::Result;

/// `--provider` on `state` and `brief`: the providers named, or every
/// provider when none is.
#[derive(Debug, Clone, Default)]
pub struct ProviderFilter(Vec<String>);

impl ProviderFilter {
    /// The filter for `names`. A name the catalog does not have is a
    /// config error (exit 2) with the closest name and the known ones,
    /// unless `recorded` says the record still names it (a provider the
    /// catalog dropped).
    pub fn new(
        catalog: &Catalog,
        names: &[String],
        recorded: impl Fn(&str) -> bool,
    ) -> Result<ProviderFilter> {
        for p in names {
            if !recorded(p) {
                catalog.known_provider(p, "--provider")?;
            }
        }
        Ok(ProviderFilter(names.to_vec()))
    }

    /// The providers named; empty for every provider.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// Whether `provider` is shown.
    pub fn admits(&self, provider: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|p| p == provider)
    }

    /// Whether the model `key` (`provider::model`) is shown.
    pub fn admits_key(&self, key: &str) -> bool {
        self.admits(ModelKey::provider_of(key))
    }
}
