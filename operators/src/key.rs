//! Join keys: the trait every key type implements, and [`Key`], a dynamically typed key for
//! integer, string, binary and composite columns with SQL NULL.
//!
//! [`JoinKey`] is implemented for the integers (8 to 128 bits, `isize`, `usize`), `bool`, `char`,
//! `String`, byte strings (`Vec<u8>`, and `[u8; N]` up to 32 bytes), `Option<T>` (`None` is
//! NULL), tuples of one to four keys, and [`Key`]. A newtype around a key type gets it from
//! [`join_key_newtype!`](crate::join_key_newtype). A join compares keys of one type only, but
//! equal values hash alike across types: an integer of any width, a `char` and the one-character
//! `String`, bytes in any container, a tuple and the composite [`Key`] of the same parts.
//!
//! SQL semantics: a NULL key matches nothing, not even another NULL. A composite key or tuple with
//! any NULL component is NULL as a whole, so [`Key::composite`] folds it to [`Key::Null`].

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
///
/// There is no blanket impl for every `T: Hash`: `std`'s `Hash` is not stable across platforms
/// or Rust versions (integers are fed in native byte order, `usize` is 4 bytes in the browser
/// build and 8 natively, and std's own impls may change), so two processes, or a native and a
/// browser build, could route one key to different partitions and miss matches. Each key type
/// therefore says how it hashes; for a newtype around a key type, [`join_key_newtype!`] writes
/// the impl.
///
/// [`join_key_newtype!`]: crate::join_key_newtype
pub trait JoinKey: ExchangeData + Clone + Eq + Hash + Ord + Debug {
    /// True for SQL NULL: such a key matches nothing.
    fn is_null(&self) -> bool;
    /// A hash that is the same on every platform and in every process.
    fn stable_hash(&self) -> u64;
}

/// Implements [`JoinKey`] for one or more newtypes around a key type, by
/// delegating to the wrapped value (field `.0`): the newtype is NULL when its value is, and
/// hashes exactly like it, so it partitions like the bare key.
///
/// The newtype must itself have the trait's supertraits: derive `Clone`, `Debug`, `PartialEq`,
/// `Eq`, `PartialOrd`, `Ord`, `Hash`, `Serialize` and `Deserialize` (deriving keeps its order and
/// equality those of the value). A macro rather than a blanket impl because `JoinKey` cannot be
/// implemented for every `Hash` type (see [`JoinKey`]).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use skewjoin_operators::{join_key_newtype, JoinConfig, JoinKey, JoinType, ShuffleJoin};
/// use timely::dataflow::operators::capture::Extract;
/// use timely::dataflow::operators::{Capture, ToStream};
///
/// #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
/// struct CustomerId(u64);
///
/// #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
/// struct Sku(Option<String>);
///
/// join_key_newtype!(CustomerId, Sku);
///
/// assert_eq!(CustomerId(7).stable_hash(), 7u64.stable_hash());
/// assert!(Sku(None).is_null());
///
/// let captured = timely::example(|scope| {
///     let orders = vec![(CustomerId(1), 250u32), (CustomerId(2), 100)];
///     let names = vec![(CustomerId(1), String::from("Ada"))];
///     let orders = orders.to_stream(scope).container::<Vec<_>>();
///     let names = names.to_stream(scope).container::<Vec<_>>();
///     orders.shuffle_join(names, JoinType::Inner, &JoinConfig::new()).capture()
/// });
/// let rows: Vec<_> = captured.extract().into_iter().flat_map(|(_, rows)| rows).collect();
/// assert_eq!(rows, vec![(CustomerId(1), Some(250), Some(String::from("Ada")))]);
/// ```
#[macro_export]
macro_rules! join_key_newtype {
    ($($newtype:ty),+ $(,)?) => {$(
        impl $crate::key::JoinKey for $newtype {
            #[inline]
            fn is_null(&self) -> bool {
                $crate::key::JoinKey::is_null(&self.0)
            }
            #[inline]
            fn stable_hash(&self) -> u64 {
                $crate::key::JoinKey::stable_hash(&self.0)
            }
        }
    )+};
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
// `bool` hashes like the integers 0 and 1.
int_key!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize, bool);

/// 128-bit integers hash like the 64-bit integer of the same value where there is one, so that
/// widths hash alike as the narrower integers do; wider values hash by their two 64-bit halves.
impl JoinKey for u128 {
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        match u64::try_from(*self) {
            Ok(narrow) => narrow.stable_hash(),
            Err(_) => hash_u128_halves(*self),
        }
    }
}

/// See the `u128` impl: a value that fits in `i64` or `u64` hashes like it, so `i128` and
/// `u128` agree on every value both can hold.
impl JoinKey for i128 {
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        if let Ok(narrow) = i64::try_from(*self) {
            narrow.stable_hash()
        } else if let Ok(narrow) = u64::try_from(*self) {
            narrow.stable_hash()
        } else {
            hash_u128_halves(*self as u128)
        }
    }
}

fn hash_u128_halves(bits: u128) -> u64 {
    let mut hasher = StableHasher::new();
    hasher.write_u64(bits as u64);
    hasher.write_u64((bits >> 64) as u64);
    hasher.finish()
}

/// A character hashes as the one-character string it is, like a `String` or [`Key::Str`] of the
/// same text.
impl JoinKey for char {
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        let mut utf8 = [0u8; 4];
        hash_bytes(self.encode_utf8(&mut utf8).as_bytes())
    }
}

impl JoinKey for String {
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        hash_bytes(self.as_bytes())
    }
}

/// Bytes hash like a [`Key::Bytes`] of the same bytes.
impl JoinKey for Vec<u8> {
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        hash_bytes(self)
    }
}

/// Fixed-size byte strings (hashes, UUIDs, addresses) hash like a `Vec<u8>` of the same bytes.
/// Arrays of up to 32 bytes qualify: serde, through which timely exchanges records, implements
/// its traits for no longer arrays; a longer key can be a `Vec<u8>`.
impl<const N: usize> JoinKey for [u8; N]
where
    [u8; N]: ExchangeData,
{
    fn is_null(&self) -> bool {
        false
    }
    fn stable_hash(&self) -> u64 {
        hash_bytes(self)
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

/// A one-element tuple is its element: the same NULL and the same hash, as
/// [`Key::composite`] of one part is that part.
impl<A: JoinKey> JoinKey for (A,) {
    fn is_null(&self) -> bool {
        self.0.is_null()
    }
    fn stable_hash(&self) -> u64 {
        self.0.stable_hash()
    }
}

/// Tuples of two to four keys are NULL if any component is, and hash by feeding each
/// component's hash to one [`StableHasher`]: the scheme of [`Key::Composite`], so a tuple of
/// `i64`s, strings or `Key`s hashes like the composite key of the same parts.
macro_rules! tuple_key {
    ($($component:ident $index:tt),+) => {
        impl<$($component: JoinKey),+> JoinKey for ($($component,)+) {
            fn is_null(&self) -> bool {
                $(self.$index.is_null())||+
            }
            fn stable_hash(&self) -> u64 {
                let mut hasher = StableHasher::new();
                $(hasher.write_u64(self.$index.stable_hash());)+
                hasher.finish()
            }
        }
    };
}
tuple_key!(A 0, B 1);
tuple_key!(A 0, B 1, C 2);
tuple_key!(A 0, B 1, C 2, D 3);

const NULL_HASH: u64 = 0x6e75_6c6c_6b65_7921;

/// A dynamically typed join key: what the `skewjoin` binary builds from file columns.
///
/// Integer columns of every width are widened to `i64`, so an `int32` key joins an `int64` key.
/// Other column types are mapped onto these by the runtime (dates, times, floats as integers,
/// decimals as text), which checks that both sides' key columns are of one kind: the variant
/// alone does not say what a value was. The derived order (NULL, then integers, then strings,
/// then byte strings, then composites, then pairs of 32-bit integers) is total, which range
/// partitioning needs; it is not the order of the tuples where a composite of two integers
/// mixes pairs and wider values, which no join needs.
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
    /// Two integer columns whose values both fit in 32 bits, the usual composite key (a pair of
    /// foreign keys such as TPC-H's `(partkey, suppkey)`), held inline: a `Composite` of two
    /// parts allocates them, and on TPC-H lineitem x partsupp allocating and freeing them was
    /// 40 % of the join's CPU. The same key as `Composite([Int(a), Int(b)])` in its hash and
    /// display; [`Key::composite`] makes one or the other from the values alone, so equal
    /// tuples always get the same variant.
    IntPair(i32, i32),
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
    /// A key from several column values: NULL if any part is NULL, the part itself if there is
    /// one, [`Key::IntPair`] for two integers of 32 bits.
    pub fn composite(mut parts: Vec<Key>) -> Key {
        if parts.iter().any(|part| matches!(part, Key::Null)) {
            return Key::Null;
        }
        match parts.len() {
            0 => Key::Null,
            1 => parts.pop().expect("one part"),
            2 => {
                let second = parts.pop().expect("two parts");
                let first = parts.pop().expect("two parts");
                Key::pair(first, second)
            }
            _ => Key::Composite(ThinVec::from(parts)),
        }
    }

    /// The key of two column values: [`Key::composite`] of the two, without a `Vec`.
    pub fn pair(first: Key, second: Key) -> Key {
        match (first, second) {
            (Key::Null, _) | (_, Key::Null) => Key::Null,
            (Key::Int(a), Key::Int(b)) => match (i32::try_from(a), i32::try_from(b)) {
                (Ok(a), Ok(b)) => Key::IntPair(a, b),
                _ => Key::Composite(ThinVec::from(vec![Key::Int(a), Key::Int(b)])),
            },
            (first, second) => Key::Composite(ThinVec::from(vec![first, second])),
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
            Key::IntPair(a, b) => {
                let mut hasher = StableHasher::new();
                hasher.write_u64(hash_u64(i64::from(*a) as u64));
                hasher.write_u64(hash_u64(i64::from(*b) as u64));
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
            Key::IntPair(a, b) => write!(f, "({a}, {b})"),
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
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    use timely::dataflow::operators::{Inspect, ToStream};

    use super::*;
    use crate::reference::{nested_loop_join, JoinedRow};
    use crate::{JoinConfig, JoinType, ShuffleJoin};

    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    struct OrderId(u64);

    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    struct Region(Option<String>);

    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    struct Shelf((u32, char));

    crate::join_key_newtype!(OrderId, Region, Shelf);

    /// Shuffle-Join on three workers, each starting with every third row of each side, so that a
    /// key's rows meet only if every worker routes them to the same partition. Returns the rows,
    /// sorted, and the workers that emitted any.
    fn shuffle_join_on_three_workers<K: JoinKey + Sync>(
        left: &[(K, u32)],
        right: &[(K, u32)],
        how: JoinType,
    ) -> (Vec<JoinedRow<K, u32, u32>>, BTreeSet<usize>) {
        let inputs = Arc::new((left.to_vec(), right.to_vec()));
        let emitted = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&emitted);
        timely::execute(timely::Config::process(3), move |worker| {
            let (index, peers) = (worker.index(), worker.peers());
            let share = |rows: &[(K, u32)]| -> Vec<(K, u32)> {
                rows.iter().skip(index).step_by(peers).cloned().collect()
            };
            let (left, right) = (share(&inputs.0), share(&inputs.1));
            let sink = Arc::clone(&sink);
            worker.dataflow::<u32, _, _>(|scope| {
                let left = left.to_stream(scope).container::<Vec<_>>();
                let right = right.to_stream(scope).container::<Vec<_>>();
                left.shuffle_join(right, how, &JoinConfig::new())
                    .inspect(move |row| sink.lock().unwrap().push((index, row.clone())));
            });
        })
        .unwrap();
        let emitted = std::mem::take(&mut *emitted.lock().unwrap());
        let workers = emitted.iter().map(|(worker, _)| *worker).collect();
        let mut rows: Vec<_> = emitted.into_iter().map(|(_, row)| row).collect();
        rows.sort();
        (rows, workers)
    }

    /// A full join of keys `key(0..40)` with `key(20..60)`, two rows a key on each side, on three
    /// workers, must give the nested-loop reference's rows; distinct keys must hash apart (a
    /// constant hash would join correctly on one worker and hide a broken impl).
    fn assert_joins_across_workers<K: JoinKey + Sync>(key: impl Fn(u64) -> K) {
        let left: Vec<_> = (0..80u32).map(|i| (key(u64::from(i % 40)), i)).collect();
        let right: Vec<_> = (0..80u32)
            .map(|i| (key(20 + u64::from(i % 40)), 1000 + i))
            .collect();
        let mut expected = nested_loop_join(&left, &right, JoinType::Full);
        expected.sort();
        let (rows, workers) = shuffle_join_on_three_workers(&left, &right, JoinType::Full);
        assert_eq!(rows, expected, "keys like {:?}", left[1].0);
        let keys: BTreeSet<&K> = left.iter().chain(&right).map(|(key, _)| key).collect();
        let hashes: BTreeSet<u64> = keys.iter().map(|key| key.stable_hash()).collect();
        assert_eq!(hashes.len(), keys.len(), "keys like {:?}", left[1].0);
        if keys.len() > 2 {
            assert!(
                workers.len() > 1,
                "keys like {:?} all on one worker",
                left[1].0
            );
        }
    }

    #[test]
    fn tuple_keys_join_across_workers() {
        assert_joins_across_workers(|i| (i,));
        assert_joins_across_workers(|i| (i, i * 7, i % 3));
        assert_joins_across_workers(|i| (i as i32, format!("k{i}"), i % 2 == 0, Some(i)));
    }

    #[test]
    fn char_and_bool_keys_join_across_workers() {
        // Greek letters: two bytes of UTF-8 each.
        assert_joins_across_workers(|i| char::from_u32(0x3b1 + i as u32).unwrap());
        assert_joins_across_workers(|i| i % 2 == 0);
    }

    #[test]
    fn wide_integer_keys_join_across_workers() {
        // Key 0 fits in 64 bits; the others need all 128.
        assert_joins_across_workers(|i| u128::from(i) << 70 | u128::from(i));
        assert_joins_across_workers(|i| -(i128::from(i) << 80) - 1);
    }

    #[test]
    fn byte_keys_join_across_workers() {
        assert_joins_across_workers(|i| {
            let mut uuid = [0u8; 16];
            uuid[..8].copy_from_slice(&i.to_le_bytes());
            uuid
        });
        assert_joins_across_workers(|i| vec![i as u8; i as usize % 5 + 1]);
    }

    #[test]
    fn newtype_keys_join_across_workers() {
        assert_joins_across_workers(OrderId);
        assert_joins_across_workers(|i| Region(Some(format!("r{i}"))));
        assert_joins_across_workers(|i| Shelf((i as u32, 'x')));
    }

    #[test]
    fn tuples_with_a_null_component_never_match() {
        let keys = [
            (Some(1u64), Some("a".to_string()), Some(3u64)),
            (None, Some("a".to_string()), Some(3)),
            (Some(1), None, Some(3)),
            (Some(1), Some("a".to_string()), None),
        ];
        let left: Vec<_> = keys.iter().cloned().zip(0..).collect();
        let right: Vec<_> = keys.iter().cloned().zip(10..).collect();
        for how in [JoinType::Inner, JoinType::Full] {
            let mut expected = nested_loop_join(&left, &right, how);
            expected.sort();
            let (rows, _) = shuffle_join_on_three_workers(&left, &right, how);
            assert_eq!(rows, expected, "{how:?}");
            let pairs: Vec<_> = rows
                .iter()
                .filter(|(_, l, r)| l.is_some() && r.is_some())
                .collect();
            assert_eq!(pairs, [&(keys[0].clone(), Some(0), Some(10))], "{how:?}");
        }
        assert!((None::<u64>,).is_null());
        assert!((1u64, 2u64, 3u64, None::<u64>).is_null());
        assert!((1u64, Key::Null, 3u64, 4u64).is_null());
        assert!(!(1u64, 'c', true, [0u8; 4]).is_null());
    }

    #[test]
    fn new_key_types_hash_like_their_counterparts() {
        // Tuples hash like the composite `Key` of the same parts; a 1-tuple like its element.
        let parts = [Key::Int(1), Key::str("a"), Key::Int(-3), Key::str("z")];
        assert_eq!(
            (1i64, Key::str("a"), -3i64).stable_hash(),
            Key::composite(parts[..3].to_vec()).stable_hash()
        );
        assert_eq!(
            (1i64, String::from("a"), -3i32, Key::str("z")).stable_hash(),
            Key::composite(parts.to_vec()).stable_hash()
        );
        assert_eq!((7u64,).stable_hash(), 7u64.stable_hash());
        assert_ne!(
            (1u64, 2u64, 3u64).stable_hash(),
            (1u64, (2u64, 3u64)).stable_hash()
        );
        // A character is text; a bool is 0 or 1.
        assert_eq!('\u{e9}'.stable_hash(), String::from("\u{e9}").stable_hash());
        assert_eq!('a'.stable_hash(), Key::str("a").stable_hash());
        assert_eq!(true.stable_hash(), 1u64.stable_hash());
        assert_eq!(false.stable_hash(), 0i32.stable_hash());
        // 128-bit integers hash like the 64-bit integer of the same value, where there is one.
        assert_eq!(u128::from(u64::MAX).stable_hash(), u64::MAX.stable_hash());
        assert_eq!(i128::from(u64::MAX).stable_hash(), u64::MAX.stable_hash());
        assert_eq!((-5i128).stable_hash(), (-5i64).stable_hash());
        assert_eq!((1i128 << 100).stable_hash(), (1u128 << 100).stable_hash());
        assert_ne!((1u128 << 64).stable_hash(), 1u128.stable_hash());
        assert_ne!((1u128 << 64).stable_hash(), 0u128.stable_hash());
        // Bytes hash alike whatever holds them.
        let bytes = [1u8, 2, 3];
        assert_eq!(bytes.to_vec().stable_hash(), bytes.stable_hash());
        assert_eq!(
            bytes.stable_hash(),
            Key::Bytes(ThinVec::from(&bytes[..])).stable_hash()
        );
    }

    #[test]
    fn newtype_keys_hash_like_their_inner_value() {
        assert_eq!(OrderId(42).stable_hash(), 42u64.stable_hash());
        let eu = Some(String::from("eu"));
        assert_eq!(Region(eu.clone()).stable_hash(), eu.stable_hash());
        assert!(Region(None).is_null());
        assert!(!Region(eu).is_null());
        assert_eq!(Shelf((3, 'b')).stable_hash(), (3u32, 'b').stable_hash());
    }

    /// The new key types' hashes are part of the format too (see `stable_hashes_do_not_change`).
    #[test]
    fn new_key_type_hashes_do_not_change() {
        assert_eq!((7u64,).stable_hash(), 0x15be_fa7d_ddf7_51d9);
        assert_eq!((1u64, 2u64, 3u64).stable_hash(), 0xc8f0_ca8e_6d4c_27bd);
        let four = (1u64, String::from("a"), 'b', true);
        assert_eq!(four.stable_hash(), 0x6ae6_2b72_c187_cf4a);
        assert_eq!('a'.stable_hash(), 0xcf1f_9636_51bf_86bc);
        assert_eq!('\u{e9}'.stable_hash(), 0xe9b8_d78c_81ac_04ba);
        assert_eq!(true.stable_hash(), 0x42da_b77b_318f_85c9);
        assert_eq!((1u128 << 100 | 5).stable_hash(), 0xea37_df5a_220e_fa3a);
        assert_eq!((-(1i128 << 100)).stable_hash(), 0x43e5_537b_f755_ca3f);
        let bytes = [0xde_u8, 0xad, 0xbe, 0xef];
        assert_eq!(bytes.stable_hash(), 0x99d6_72b2_b56a_f761);
        assert_eq!(bytes.to_vec().stable_hash(), 0x99d6_72b2_b56a_f761);
    }

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
    fn a_pair_of_small_integers_is_held_inline_and_is_the_composite_key_of_its_parts() {
        let pair = Key::composite(vec![Key::Int(-3), Key::Int(i64::from(i32::MAX))]);
        assert_eq!(pair, Key::IntPair(-3, i32::MAX));
        assert_eq!(Key::pair(Key::Int(-3), Key::Int(i64::from(i32::MAX))), pair);
        let parts = Key::Composite(ThinVec::from(vec![
            Key::Int(-3),
            Key::Int(i64::from(i32::MAX)),
        ]));
        assert_eq!(pair.stable_hash(), parts.stable_hash());
        assert_eq!(
            pair.stable_hash(),
            (-3i64, i64::from(i32::MAX)).stable_hash()
        );
        assert_eq!(pair.to_string(), parts.to_string());
        // A value past 32 bits, a string part or a NULL part: not a pair.
        let wide = Key::composite(vec![Key::Int(1), Key::Int(1 << 40)]);
        assert!(matches!(wide, Key::Composite(_)), "{wide:?}");
        assert_eq!(wide.stable_hash(), (1i64, 1i64 << 40).stable_hash());
        assert!(matches!(
            Key::pair(Key::Int(1), Key::str("a")),
            Key::Composite(_)
        ));
        assert_eq!(Key::pair(Key::Int(1), Key::Null), Key::Null);
        assert_eq!(Key::pair(Key::Null, Key::Int(1)), Key::Null);
        // Both ways of making a key give the same key, and a pair's hash is its tuple's.
        for (a, b) in [
            (0, 0),
            (1, -1),
            (i64::from(i32::MIN), 5),
            (1 << 33, 2),
            (3, -(1 << 35)),
        ] {
            let made = Key::composite(vec![Key::Int(a), Key::Int(b)]);
            assert_eq!(made, Key::pair(Key::Int(a), Key::Int(b)));
            assert_eq!(made.stable_hash(), (a, b).stable_hash());
            assert_ne!(made, Key::pair(Key::Int(a), Key::Int(b + 1)));
        }
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
        assert_eq!(
            (1u64, String::from("a")).stable_hash(),
            0x5f53_2f17_d367_2733
        );
        assert_eq!(
            Key::str("example.com/a").stable_hash(),
            0xc236_7ffb_100e_8202
        );
        let composite = Key::composite(vec![Key::Int(1), Key::str("a")]);
        assert_eq!(composite.stable_hash(), 0x5f53_2f17_d367_2733);
    }
}
