//! [`Target`]: what one request to a provider goes to (provider, model,
//! and which key), and the ids its usage windows and benches are kept
//! under. Route's attempts and every probe are counted by it.

/// What one routed attempt went to. Keys are named by index and
/// fingerprint, never by value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub provider: String,
    pub model: String,
    /// Which of the provider's keys; `None` for a keyless provider.
    pub key_index: Option<usize>,
    /// A short, non-reversible fingerprint of the key, so a bench survives
    /// reordering keys but not replacing one.
    pub key_fingerprint: Option<String>,
}

impl Target {
    pub fn new(provider: &str, model: &str) -> Target {
        Target {
            provider: provider.to_string(),
            model: model.to_string(),
            key_index: None,
            key_fingerprint: None,
        }
    }

    pub fn with_key(mut self, index: usize, fingerprint: &str) -> Target {
        self.key_index = Some(index);
        self.key_fingerprint = Some(fingerprint.to_string());
        self
    }

    /// `provider`, or `provider#key<index>:<fingerprint>` when there is a
    /// key: what a key-level bench is stored under.
    pub fn key_id(&self) -> String {
        match (self.key_index, &self.key_fingerprint) {
            (Some(i), Some(fp)) => format!("{}#key{i}:{fp}", self.provider),
            (Some(i), None) => format!("{}#key{i}", self.provider),
            (None, _) => self.provider.clone(),
        }
    }

    /// `provider::model`, as in model_state.json.
    pub fn model_id(&self) -> String {
        crate::catalog::ModelKey::new(&self.provider, &self.model).into()
    }

    /// `<key id>::model`: one key's allowance for one model, which is what
    /// rate limits and most quotas count (Groq, Gemini, OpenRouter).
    pub fn key_model_id(&self) -> String {
        format!("{}::{}", self.key_id(), self.model)
    }

    /// Every id a bench that keeps this target out may be stored under:
    /// its provider, key, model and key+model (once each).
    pub fn bench_ids(&self) -> Vec<String> {
        let mut ids = vec![
            self.provider.clone(),
            self.key_id(),
            self.model_id(),
            self.key_model_id(),
        ];
        // A keyless provider's key is the provider.
        ids.dedup();
        ids
    }
}
