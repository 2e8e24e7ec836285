//! Enum names written once. A fieldless enum that is stored or printed by
//! name derives its names with strum (`IntoStaticStr`, `EnumString`,
//! `VariantNames`, `Display`), and [`serde_via_strum!`] makes serde read and
//! write those same names: the two cannot disagree, so nothing has to test
//! that they do.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// `Serialize` and `Deserialize` for a fieldless enum through its strum
/// names. A string that names no variant gets the message serde's derive
/// gives (``unknown variant `x`, expected one of `a`, `b` ``), which is what
/// a user who mistyped one in a file sees.
macro_rules! serde_via_strum {
    ($t:ty) => {
        impl ::serde::Serialize for $t {
            fn serialize<S: ::serde::Serializer>(
                &self,
                s: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(<&'static str>::from(*self))
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $t {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                d: D,
            ) -> ::std::result::Result<Self, D::Error> {
                // As an enum, not a string: each format then refuses a
                // value of the wrong kind in the words it uses for a
                // derived enum (toml: `wanted string or table`).
                d.deserialize_enum(
                    stringify!($t),
                    <$t as ::strum::VariantNames>::VARIANTS,
                    $crate::names::NameVisitor::<$t>::new(),
                )
            }
        }
    };
}
pub(crate) use serde_via_strum;

/// Reads one of `T`'s names; see [`serde_via_strum!`].
pub struct NameVisitor<T>(PhantomData<T>);

impl<T> NameVisitor<T> {
    pub fn new() -> Self {
        NameVisitor(PhantomData)
    }
}

impl<T> Default for NameVisitor<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'de, T: FromStr + strum::VariantNames> serde::de::Visitor<'de> for NameVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one of ")?;
        for (i, name) in T::VARIANTS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{name}`")?;
        }
        Ok(())
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(|_| E::unknown_variant(v, T::VARIANTS))
    }

    /// A unit variant named by a string: how formats hand an enum over.
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
        use serde::de::VariantAccess;
        // The name read as the variant itself, so that a format places an
        // unknown name where it stands, as it does for a derived enum.
        let (value, variant) = data.variant_seed(NameVisitor::<T>::new())?;
        variant.unit_variant()?;
        Ok(value)
    }
}

impl<'de, T: FromStr + strum::VariantNames> serde::de::DeserializeSeed<'de> for NameVisitor<T> {
    type Value = T;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_identifier(self)
    }
}

#[cfg(test)]
mod tests {
    use crate::state::ModelState;

    #[test]
    fn serde_reads_and_writes_the_strum_names() {
        for v in <ModelState as strum::IntoEnumIterator>::iter() {
            let text = serde_json::to_string(&v).unwrap();
            assert_eq!(text, format!("\"{}\"", v.as_str()));
            assert_eq!(serde_json::from_str::<ModelState>(&text).unwrap(), v);
        }
        let err = serde_json::from_str::<ModelState>("\"sleeping\"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown variant `sleeping`, expected one of `active`, `paused`, `disabled` at line 1 column 10"
        );
        // A value of the wrong kind in each format's words for an enum,
        // as a derived enum had them.
        let err = serde_json::from_str::<ModelState>("3").unwrap_err();
        assert_eq!(err.to_string(), "expected value at line 1 column 1");
        let err =
            toml::from_str::<std::collections::BTreeMap<String, ModelState>>("s = 3").unwrap_err();
        assert!(err.to_string().contains("wanted string or table"), "{err}");
    }
}
