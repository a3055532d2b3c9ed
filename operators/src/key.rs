//! Join keys: the trait every key type implements, and [`Key`], a dynamically typed key for
//! integer, string and composite columns with SQL NULL.
//!
//! SQL semantics: a NULL key matches nothing, not even another NULL. A composite key with any NULL
//! component is NULL as a whole, so [`Key::composite`] folds it to [`Key::Null`].

use std::fmt::{self, Debug, Display};
use std::hash::Hash;

use serde::{Deserialize, Serialize};
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
/// The derived order (NULL, then integers, then strings, then composites) is total, which range
/// partitioning needs.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub enum Key {
    /// SQL NULL: matches nothing.
    #[default]
    Null,
    /// Any integer column, widened.
    Int(i64),
    /// A UTF-8 string column.
    Str(Box<str>),
    /// Two or more columns, none NULL.
    Composite(Box<[Key]>),
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
            _ => Key::Composite(parts.into_boxed_slice()),
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
    fn null_semantics() {
        assert!(Key::Null.is_null());
        assert!(None::<i64>.is_null());
        assert!((Some(1i64), None::<i64>).is_null());
        assert!(!(1i64, String::from("a")).is_null());
    }
}
