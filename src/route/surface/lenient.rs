//! Reading a client's body leniently, for the surfaces' wire types
//! (`anthropic/wire.rs`, `responses/wire.rs`): a value of the wrong kind
//! is data to report or refuse in the surface's own words, never a serde
//! error that would change which refusal comes first.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A view of `v`, or its default when `v` is not an object of that
/// shape: for the views whose every field is optional and lenient, a
/// value route reads nothing from. Only an object: serde would read a
/// struct from a list too.
pub fn view<T: DeserializeOwned + Default>(v: Value) -> T {
    match v {
        Value::Object(_) => T::deserialize(v).unwrap_or_default(),
        _ => T::default(),
    }
}

/// A field read leniently (`#[serde(deserialize_with = "lenient")]`): a
/// value of another type reads as absent.
pub fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}
