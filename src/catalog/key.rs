//! `provider::model`, the one name of a model everywhere a provider's name
//! and a model id travel together: the state file's keys, the health log's
//! readers, route's `model` field and its trail, the alerts.
//!
//! The text is split at the first `::`: a provider's name never holds one
//! (the catalog refuses it), a model id may (`p::org::m` is model
//! `org::m` of provider `p`). A key is kept as the one string it is
//! written as, so building one costs the one allocation a `format!` did,
//! and a map keyed by it is looked up with a `&str` as before.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// Between a provider's name and a model id.
const SEP: &str = "::";

/// A model of a provider: `provider::model`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ModelKey {
    /// `provider::model`, as written.
    text: String,
    /// Where the provider's name ends (and `::` starts).
    split: usize,
}

impl ModelKey {
    pub fn new(provider: &str, model: &str) -> ModelKey {
        let mut text = String::with_capacity(provider.len() + SEP.len() + model.len());
        text.push_str(provider);
        text.push_str(SEP);
        text.push_str(model);
        ModelKey {
            text,
            split: provider.len(),
        }
    }

    /// Write `provider::model` into `buf` (cleared first): a hot loop's
    /// lookup key, without an allocation per lookup.
    pub fn write_into(buf: &mut String, provider: &str, model: &str) {
        buf.clear();
        buf.push_str(provider);
        buf.push_str(SEP);
        buf.push_str(model);
    }

    /// The provider's name and the model id of `provider::model`, without
    /// allocating; `None` when `text` has no `::`.
    pub fn split(text: &str) -> Option<(&str, &str)> {
        text.split_once(SEP)
    }

    /// The provider's name of `text`, or all of it when it names no model.
    pub fn provider_of(text: &str) -> &str {
        Self::split(text).map_or(text, |(p, _)| p)
    }

    /// The model id of `text` when it is a key of `provider`.
    pub fn model_in<'a>(text: &'a str, provider: &str) -> Option<&'a str> {
        Self::split(text).and_then(|(p, m)| (p == provider).then_some(m))
    }

    /// Whether `text` names a model of a provider, not a bare model id.
    pub fn is_key(text: &str) -> bool {
        text.contains(SEP)
    }

    pub fn provider(&self) -> &str {
        &self.text[..self.split]
    }

    pub fn model(&self) -> &str {
        &self.text[self.split + SEP.len()..]
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ModelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Text without `::`: a bare model id, not a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAKey(pub String);

impl fmt::Display for NotAKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not provider::model", self.0)
    }
}

impl std::error::Error for NotAKey {}

impl FromStr for ModelKey {
    type Err = NotAKey;

    fn from_str(s: &str) -> Result<ModelKey, NotAKey> {
        match s.find(SEP) {
            Some(split) => Ok(ModelKey {
                text: s.to_string(),
                split,
            }),
            None => Err(NotAKey(s.to_string())),
        }
    }
}

impl From<ModelKey> for String {
    fn from(k: ModelKey) -> String {
        k.text
    }
}

/// The text's hash alone, as [`Borrow<str>`] requires: a derived one would
/// also hash `split`, and a lookup by `&str` would miss.
impl Hash for ModelKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl AsRef<str> for ModelKey {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// Equality and hashing are the text's, so a map keyed by `ModelKey` is
/// looked up with the `&str` of a file's key.
impl Borrow<str> for ModelKey {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl serde::Serialize for ModelKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for ModelKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ModelKey, D::Error> {
        let text = String::deserialize(d)?;
        match text.find(SEP) {
            Some(split) => Ok(ModelKey { text, split }),
            None => Err(serde::de::Error::custom(NotAKey(text))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_splits_at_the_first_separator() {
        let k = ModelKey::new("groq", "llama-3.3");
        assert_eq!((k.provider(), k.model()), ("groq", "llama-3.3"));
        assert_eq!(k.to_string(), "groq::llama-3.3");
        assert_eq!("groq::llama-3.3".parse::<ModelKey>(), Ok(k));

        let nested: ModelKey = "p::org::m".parse().unwrap();
        assert_eq!((nested.provider(), nested.model()), ("p", "org::m"));
        assert_eq!(nested, ModelKey::new("p", "org::m"));
        assert_eq!(ModelKey::split("p::org::m"), Some(("p", "org::m")));
        assert_eq!(ModelKey::provider_of("p::org::m"), "p");
        assert_eq!(ModelKey::provider_of("bare"), "bare");

        assert!("llama".parse::<ModelKey>().is_err());
        assert_eq!(
            serde_json::from_str::<ModelKey>("\"p::m\"").unwrap(),
            ModelKey::new("p", "m")
        );
        assert_eq!(
            serde_json::to_string(&ModelKey::new("p", "m")).unwrap(),
            "\"p::m\""
        );
        assert!(serde_json::from_str::<ModelKey>("\"m\"").is_err());
    }

    #[test]
    fn a_map_keyed_by_keys_is_looked_up_by_text() {
        let map = std::collections::HashMap::from([(ModelKey::new("p", "m"), 1)]);
        assert_eq!(map.get("p::m"), Some(&1));
        let set = std::collections::BTreeSet::from([ModelKey::new("p", "m")]);
        assert!(set.contains("p::m") && !set.contains("p::n"));
    }
}
