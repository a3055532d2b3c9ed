//! Join keys: the trait every key type implements, and [`Key`], a dynamically typed key for
//! integer, string, binary and composite columns with SQL NULL.
//!
//! SQL semantics: a NULL key matches nothing, not even another NULL. A composite key with any NULL
//! component is NULL as a whole, so [`Key::composite`] folds it to [`Key::Null`].

use std::fmt::{self, Debug, Display};
use std::hash::Hash;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thin_vec::ThinVec;
use timely::ExchangeData;

use crate::hash::{hash_bytes, hash_u64, StableHasher};

/// What the join operators need of a key.
///
/// Keys are ordered (range partitioning cuts the key space), hashed stably (hash partitioning must
/// agree across workers, processes and the browser build) and may be NULL.
pub trait JoinKey: ExchangeData + Clone + Eq + Hash + Ord + Debug {
    /// True for SQL NULL: such a key matches nothing.
    fn is_null(&self) -> bool;
    /// A hash that is the same on every platform and in every process.
    fn stable_hash(&self) -> u64;
}

macro_rules! int_key {
    ($($t:ty),*) => {$(
        impl JoinKey for $t {
            #[inline]
            fn is_null(&self) -> bool { false }
            #[inline]
            fn stable_hash(&self) -> u64 { hash_u64(*self as i64 as u64) }
        }
    )*};
}
int_key!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

impl JoinKey for String {
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        hash_bytes(self.as_bytes())
    }
}

impl<T: JoinKey> JoinKey for Option<T> {
    fn is_null(&self) -> bool {
        match self {
            None => true,
            Some(inner) => inner.is_null(),
        }
    }
    fn stable_hash(&self) -> u64 {
        match self {
            None => NULL_HASH,
            Some(inner) => inner.stable_hash(),
        }
    }
}

impl<A: JoinKey, B: JoinKey> JoinKey for (A, B) {
    fn is_null(&self) -> bool {
        self.0.is_null() || self.1.is_null()
    }
    fn stable_hash(&self) -> u64 {
        let mut hasher = StableHasher::new();
        hasher.write_u64(self.0.stable_hash());
        hasher.write_u64(self.1.stable_hash());
        hasher.finish()
    }
}

const NULL_HASH: u64 = 0x6e75_6c6c_6b65_7921;

/// A dynamically typed join key: what the `skewjoin` binary builds from file columns.
///
/// Integer columns of every width are widened to `i64`, so an `int32` key joins an `int64` key.
/// Other column types are mapped onto these by the runtime (dates, times, floats as integers,
/// decimals as text), which checks that both sides' key columns are of one kind: the variant
/// alone does not say what a value was. The derived order (NULL, then integers, then strings,
/// then byte strings, then composites) is total, which range partitioning needs.
///
/// A key is 16 bytes: a string or the parts of a composite sit behind one thin pointer, their
/// length stored with them. Every record the join moves, exchanges, buckets and builds on holds
/// its key inline, and a key of 24 bytes (a fat pointer) made each record of the runtime 48 bytes
/// rather than 40: a uniform 10M x 10M join ran 1.65 s at 24 bytes and 1.44 s at 16 (peak memory
/// 840 MB and 689 MB).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub enum Key {
    /// SQL NULL: matches nothing.
    #[default]
    Null,
    /// Any integer column, widened.
    Int(i64),
    /// A UTF-8 string column.
    Str(KeyStr),
    /// A binary column: its bytes.
    Bytes(ThinVec<u8>),
    /// Two or more columns, none NULL.
    Composite(ThinVec<Key>),
}

/// The text of a string [`Key`]: UTF-8 in one allocation that also holds its length, behind a
/// pointer one word wide. Ordered, compared and serialized as a `str`.
///
/// ```
/// use skewjoin_operators::key::KeyStr;
///
/// let text = KeyStr::from("example.com/a");
/// assert_eq!(&*text, "example.com/a");
/// assert!(KeyStr::from("a") < KeyStr::from("b"));
/// assert_eq!(std::mem::size_of::<KeyStr>(), std::mem::size_of::<usize>());
/// ```
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyStr(ThinVec<u8>);

impl KeyStr {
    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        // SAFETY: a `KeyStr` is only ever made from a `&str` (`From<&str>`, and `Deserialize`
        // through it) and never changed, so its bytes are valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl From<&str> for KeyStr {
    fn from(text: &str) -> Self {
        KeyStr(ThinVec::from(text.as_bytes()))
    }
}

impl Deref for KeyStr {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Debug for KeyStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Debug::fmt(self.as_str(), f)
    }
}

impl Display for KeyStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self.as_str(), f)
    }
}

impl Serialize for KeyStr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for KeyStr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(KeyStr::from(&*text))
    }
}

impl Key {
    /// A key from several column values: NULL if any part is NULL, the part itself if there is one.
    pub fn composite(mut parts: Vec<Key>) -> Key {
        if parts.iter().any(|part| matches!(part, Key::Null)) {
            return Key::Null;
        }
        match parts.len() {
            0 => Key::Null,
            1 => parts.pop().expect("one part"),
            _ => Key::Composite(ThinVec::from(parts)),
        }
    }

    /// A string key.
    pub fn str(value: &str) -> Key {
        Key::Str(value.into())
    }
}

impl From<i64> for Key {
    fn from(value: i64) -> Self {
        Key::Int(value)
    }
}

impl From<&str> for Key {
    fn from(value: &str) -> Self {
        Key::str(value)
    }
}

impl<T: Into<Key>> From<Option<T>> for Key {
    fn from(value: Option<T>) -> Self {
        value.map_or(Key::Null, Into::into)
    }
}

impl JoinKey for Key {
    #[inline]
    fn is_null(&self) -> bool {
        matches!(self, Key::Null)
    }

    /// Integer keys, the common case, hash inline at each of the several places a record's
    /// key is hashed (routing, bucketing, the kernel's table); strings and composites out of line.
    #[inline]
    fn stable_hash(&self) -> u64 {
        match self {
            Key::Int(value) => hash_u64(*value as u64),
            Key::Null => NULL_HASH,
            other => other.stable_hash_out_of_line(),
        }
    }
}

impl Key {
    #[inline(never)]
    fn stable_hash_out_of_line(&self) -> u64 {
        match self {
            Key::Null => NULL_HASH,
            Key::Int(value) => hash_u64(*value as u64),
            Key::Str(value) => hash_bytes(value.as_bytes()),
            Key::Bytes(value) => hash_bytes(value),
            Key::Composite(parts) => {
                let mut hasher = StableHasher::new();
                for part in parts.iter() {
                    hasher.write_u64(part.stable_hash());
                }
                hasher.finish()
            }
        }
    }
}

impl Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Display::fmt(self, f)
    }
}

impl Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Null => write!(f, "NULL"),
            Key::Int(value) => write!(f, "{value}"),
            Key::Str(value) => write!(f, "{value:?}"),
            Key::Bytes(value) => {
                write!(f, "x'")?;
                value.iter().try_for_each(|byte| write!(f, "{byte:02x}"))?;
                write!(f, "'")
            }
            Key::Composite(parts) => {
                write!(f, "(")?;
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{part}")?;
                }
                write!(f, ")")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_with_a_null_part_is_null() {
        assert_eq!(Key::composite(vec![Key::Int(1), Key::Null]), Key::Null);
        assert_eq!(Key::composite(vec![Key::Int(1)]), Key::Int(1));
        assert!(Key::composite(vec![Key::str("a"), Key::Int(2)]) > Key::str("zzz"));
    }

    #[test]
    fn integer_widths_hash_alike() {
        assert_eq!(7i32.stable_hash(), 7i64.stable_hash());
        assert_eq!(Key::Int(7).stable_hash(), 7i64.stable_hash());
        assert_ne!(Key::Int(7).stable_hash(), Key::str("7").stable_hash());
    }

    #[test]
    fn byte_keys_compare_by_their_bytes() {
        let bytes = |b: &[u8]| Key::Bytes(ThinVec::from(b));
        assert_eq!(bytes(&[0, 0xff]), bytes(&[0, 0xff]));
        assert_ne!(bytes(&[0, 0xff]), bytes(&[0]));
        assert_eq!(bytes(b"ab").stable_hash(), bytes(b"ab").stable_hash());
        assert_eq!(bytes(&[0x0a, 0xff]).to_string(), "x'0aff'");
        assert_eq!(std::mem::size_of::<Key>(), 16);
    }

    #[test]
    fn null_semantics() {
        assert!(Key::Null.is_null());
        assert!(None::<i64>.is_null());
        assert!((Some(1i64), None::<i64>).is_null());
        assert!(!(1i64, String::from("a")).is_null());
    }

    /// Hash partitioning must agree across processes, releases and the browser build, so a
    /// key's hash is part of the format: these values were computed once and must not change.
    #[test]
    fn stable_hashes_do_not_change() {
        assert_eq!(7u64.stable_hash(), 0x15be_fa7d_ddf7_51d9);
        assert_eq!((-1i64).stable_hash(), 0xbfa5_edcb_9b6d_1965);
        assert_eq!(String::from("a").stable_hash(), 0xcf1f_9636_51bf_86bc);
        assert_eq!(None::<u64>.stable_hash(), 0x6e75_6c6c_6b65_7921);
        assert_eq!((1u64, 2u64).stable_hash(), 0x434b_762d_4d97_c791);
        assert_eq!((1u64, String::from("a")).stable_hash(), 0x5f53_2f17_d367_2733);
        assert_eq!(Key::str("example.com/a").stable_hash(), 0xc236_7ffb_100e_8202);
        let composite = Key::composite(vec![Key::Int(1), Key::str("a")]);
        assert_eq!(composite.stable_hash(), 0x5f53_2f17_d367_2733);
    }
}
