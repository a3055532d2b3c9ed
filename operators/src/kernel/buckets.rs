//! One partition's rows held in buckets by key hash, so that a large partition is joined a
//! bucket at a time, each bucket's hash table and rows small enough to stay in the CPU's caches.
//!
//! A partition's own rows of one key are complete in one partition, and a key's rows of both
//! sides land in the same bucket, so joining bucket `b` of the left with bucket `b` of the right,
//! for every `b`, is the partition's join: padding and semi/anti decisions stay local to a bucket.
//!
//! Why: a uniform partition of 5 x 10^6 rows a side builds a table of hundreds of megabytes, and
//! nearly every step of the build and the probe waits on a cache miss. Cut into 256 buckets of
//! about 20,000 rows, each bucket's build and probe run from the caches: 0.86 to 1.05 s for one
//! 5M x 5M join on one thread against 0.36 to 0.42 s, bucketing included. The rows go into their
//! bucket as they arrive, in place of the one vector they were gathered in before, so bucketing
//! costs one hash per row and no extra pass. A partition stays one bucket until it holds
//! [`SPLIT_ROWS`] rows: small joins (tests, the browser demo, a Tree-Join leaf) never pay for
//! 256 vectors.
//!
//! ```
//! use skewjoin_operators::buckets::{join_buckets_logic, KeyBuckets};
//! use skewjoin_operators::join_logic::each_row;
//! use skewjoin_operators::JoinType;
//!
//! let mut left = KeyBuckets::new();
//! let mut right = KeyBuckets::new();
//! for key in 0..100_000u64 {
//!     left.push((key, 'l'));
//!     right.push((key * 2, 'r'));
//! }
//! assert!(left.bucket_count() > 1, "a large side is bucketed");
//! let mut pairs = 0;
//! let mut count = each_row(|_: &u64, l: Option<&char>, r: Option<&char>, _: &mut Vec<()>| {
//!     assert!(l.is_some() && r.is_some());
//!     pairs += 1;
//! });
//! join_buckets_logic(&mut left, &mut right, None, None, JoinType::Inner, &mut count, &mut Vec::new());
//! assert_eq!(pairs, 50_000);
//! ```

use crate::hash::mix64;
use crate::join_logic::JoinLogic;
use crate::join_type::JoinType;
use crate::kernel::slots::prefetch;
use crate::kernel::{local_join_logic, BuildTable, SteppedJoin};
use crate::key::JoinKey;

/// Buckets of a split partition: a power of two.
pub const BUCKETS: usize = 256;

/// Rows at which a partition's one bucket splits into [`BUCKETS`].
pub const SPLIT_ROWS: usize = 1 << 15;

/// A key's bucket: low bits of the mixed stable hash. The kernel's table finds a key's slot by
/// the high bits of the same mix, so within a bucket those still spread over the whole table;
/// partitions are cut by the high bits of the unmixed hash.
#[inline]
fn bucket_of<K: JoinKey>(key: &K) -> usize {
    mix64(key.stable_hash()) as usize & (BUCKETS - 1)
}

/// A cache line's bytes.
const LINE_BYTES: usize = 64;

/// The most bytes of rows in one chunk of a bucket: below the allocator's threshold for mapping
/// memory of its own, so chunks come from and go back to its heap.
const CHUNK_BYTES: usize = 64 << 10;

/// One bucket's rows, in chunks that never move once written: a bucket grows by starting a
/// chunk (each twice the last, up to [`CHUNK_BYTES`]), not by copying its rows into a vector
/// twice as large. Growing by copying, a uniform 10M x 10M join spent about a tenth of its time
/// faulting in and zeroing the fresh pages each copy went to. The chunk being written is held
/// in the bucket itself, so that a push reads the one line of the bucket array before writing
/// the row: behind a list of chunks, every push also missed the cache on the list.
#[derive(Debug)]
struct Bucket<K, V> {
    /// The chunk rows go to.
    current: Vec<(K, V)>,
    /// Full chunks, in order.
    full: Vec<Vec<(K, V)>>,
}

impl<K, V> Bucket<K, V> {
    fn with_capacity(rows: usize) -> Self {
        Bucket {
            current: Vec::with_capacity(rows.max(1)),
            full: Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, row: (K, V)) {
        if self.current.len() == self.current.capacity() {
            self.start_chunk();
        }
        self.current.push(row);
        // The row a line's width past the end of this one (for rows of at most 64 bytes, in
        // the next line, or in this one's where it has room): rows go to 256 buckets by hash,
        // so this bucket's next row comes some 256 rows later, time for the line to arrive.
        // Without it, the samples of the scatter sat on the store of each row.
        prefetch(
            self.current
                .as_ptr()
                .wrapping_add(self.current.len() + LINE_BYTES / size_of::<(K, V)>().max(1)),
        );
    }

    #[cold]
    fn start_chunk(&mut self) {
        let most = (CHUNK_BYTES / size_of::<(K, V)>().max(1)).max(1);
        let next = (self.current.capacity() * 2).clamp(1, most);
        let full = std::mem::replace(&mut self.current, Vec::with_capacity(next));
        if !full.is_empty() {
            self.full.push(full);
        }
    }

    fn len(&self) -> usize {
        self.full.iter().map(Vec::len).sum::<usize>() + self.current.len()
    }

    /// The rows, in order.
    #[cfg(test)]
    fn rows(&self) -> impl Iterator<Item = &(K, V)> {
        self.full.iter().flatten().chain(&self.current)
    }

    /// Moves every row into `rows` (emptied first), in order, freeing the chunks.
    fn gather_into(&mut self, rows: &mut Vec<(K, V)>) {
        rows.clear();
        rows.reserve(self.len());
        for mut chunk in self.full.drain(..) {
            rows.append(&mut chunk);
        }
        rows.append(&mut self.current);
        self.current = Vec::new();
    }
}

/// The `(key, value)` rows of one partition and side, in one bucket until [`SPLIT_ROWS`], then
/// in [`BUCKETS`] buckets by key hash.
#[derive(Debug)]
pub struct KeyBuckets<K, V> {
    /// The rows while the partition is one bucket: a new partition allocates nothing, which
    /// matters to operators that hold a partition per slot for each of many timestamps.
    unsplit: Vec<(K, V)>,
    /// The [`BUCKETS`] buckets once split; empty before.
    split: Vec<Bucket<K, V>>,
    /// [`SPLIT_ROWS`], but in tests, which split small inputs to compare them with nested loops.
    split_at: usize,
}

impl<K, V> Default for KeyBuckets<K, V> {
    fn default() -> Self {
        KeyBuckets {
            unsplit: Vec::new(),
            split: Vec::new(),
            split_at: SPLIT_ROWS,
        }
    }
}

impl<K: JoinKey, V> KeyBuckets<K, V> {
    /// No rows, one bucket.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a row to its bucket, splitting the one bucket when it reaches [`SPLIT_ROWS`].
    #[inline]
    pub fn push(&mut self, row: (K, V)) {
        if self.split.is_empty() {
            self.unsplit.push(row);
            if self.unsplit.len() >= self.split_at {
                self.split();
            }
        } else {
            let bucket = bucket_of(&row.0);
            self.split[bucket].push(row);
        }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.unsplit.len() + self.split.iter().map(Bucket::len).sum::<usize>()
    }

    /// Whether no rows are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// 1, or [`BUCKETS`] once split.
    pub fn bucket_count(&self) -> usize {
        self.split.len().max(1)
    }

    /// Moves the rows of the one bucket into [`BUCKETS`] buckets (nothing if split already).
    fn split(&mut self) {
        if !self.split.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut self.unsplit);
        // Room for an even share and a little over in each bucket's first chunk.
        let room = rows.len() / BUCKETS * 5 / 4 + 16;
        self.split = (0..BUCKETS).map(|_| Bucket::with_capacity(room)).collect();
        for row in rows {
            let bucket = bucket_of(&row.0);
            self.split[bucket].push(row);
        }
    }
}

/// Joins two partitions' rows bucket by bucket with the [`kernel`](crate::kernel), as
/// [`local_join_logic`] joins two slices, and empties them: a partition split on one side only
/// is split on the other too (it holds fewer than [`SPLIT_ROWS`] rows), then bucket `b` joins
/// bucket `b`, each gathered from its chunks into one vector (reused from bucket to bucket, so
/// its pages are faulted in once). Broadcast tables are probed from every bucket, each own row
/// once.
pub fn join_buckets_logic<K, L, R, D, G>(
    left: &mut KeyBuckets<K, L>,
    right: &mut KeyBuckets<K, R>,
    broadcast_left: Option<&BuildTable<'_, K, L>>,
    broadcast_right: Option<&BuildTable<'_, K, R>>,
    how: JoinType,
    logic: &mut G,
    out: &mut Vec<D>,
) where
    K: JoinKey,
    G: JoinLogic<K, L, R, D>,
{
    if left.split.is_empty() && right.split.is_empty() {
        local_join_logic(
            &mut left.unsplit,
            &mut right.unsplit,
            broadcast_left,
            broadcast_right,
            how,
            logic,
            out,
        );
        left.unsplit = Vec::new();
        right.unsplit = Vec::new();
        return;
    }
    left.split();
    right.split();
    let (mut left_rows, mut right_rows) = (Vec::new(), Vec::new());
    for (left, right) in left.split.iter_mut().zip(right.split.iter_mut()) {
        left.gather_into(&mut left_rows);
        right.gather_into(&mut right_rows);
        local_join_logic(
            &mut left_rows,
            &mut right_rows,
            broadcast_left,
            broadcast_right,
            how,
            logic,
            out,
        );
    }
    left.split = Vec::new();
    right.split = Vec::new();
}

/// [`join_buckets_logic`] in steps of a budget of output rows: [`step`](Self::step) joins
/// bucket after bucket, and when the budget runs out inside one it keeps that bucket's join
/// ([`SteppedJoin`]) and its place, so the next call goes on from the row after the last one
/// given, even inside a hot key's run. One per operator: it holds the join in progress of one
/// pair of partitions at a time, and reuses its vectors from bucket to bucket.
#[derive(Debug)]
pub struct SteppedBuckets<K, L, R> {
    join: SteppedJoin<K, L, R>,
    /// Buckets started so far of the partitions being joined (the unsplit one counts as one).
    started: usize,
    /// Whether `join` holds a started bucket that is not done.
    joining: bool,
}

impl<K: JoinKey, L, R> Default for SteppedBuckets<K, L, R> {
    fn default() -> Self {
        SteppedBuckets {
            join: SteppedJoin::new(),
            started: 0,
            joining: false,
        }
    }
}

impl<K: JoinKey, L, R> SteppedBuckets<K, L, R> {
    /// Nothing joined yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Joins `left` with `right` as [`join_buckets_logic`] does, from where the last call
    /// stopped, handing `logic` at most `budget` output rows (and taking them off it). True
    /// once the partitions are joined and emptied; false when the budget ran out first: call
    /// again with the same partitions and broadcast tables, before any other pair.
    #[allow(clippy::too_many_arguments)]
    pub fn step<D, G>(
        &mut self,
        left: &mut KeyBuckets<K, L>,
        right: &mut KeyBuckets<K, R>,
        broadcast_left: Option<&BuildTable<'_, K, L>>,
        broadcast_right: Option<&BuildTable<'_, K, R>>,
        how: JoinType,
        logic: &mut G,
        out: &mut Vec<D>,
        budget: &mut usize,
    ) -> bool
    where
        G: JoinLogic<K, L, R, D>,
    {
        if self.started == 0 && !(left.split.is_empty() && right.split.is_empty()) {
            // A partition split on one side only is split on the other too.
            left.split();
            right.split();
        }
        loop {
            if self.joining {
                let (bl, br) = (broadcast_left, broadcast_right);
                if !self.join.step(bl, br, how, logic, out, budget) {
                    return false;
                }
                self.joining = false;
            }
            let buckets = left.split.len();
            if buckets == 0 && self.started == 0 {
                let rows = (
                    std::mem::take(&mut left.unsplit),
                    std::mem::take(&mut right.unsplit),
                );
                self.join.load(rows.0, rows.1);
            } else if self.started < buckets {
                let bucket = self.started;
                self.join.load_with(|left_rows, right_rows| {
                    left.split[bucket].gather_into(left_rows);
                    right.split[bucket].gather_into(right_rows);
                });
            } else {
                break;
            }
            self.started += 1;
            self.joining = true;
        }
        left.split = Vec::new();
        right.split = Vec::new();
        self.started = 0;
        // The rows' vectors are reused from bucket to bucket, as join_buckets_logic reuses
        // its, but not kept past the partitions: one bucket of a hot key may be large.
        self.join.clear();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join_logic::each_row;
    use crate::key::Key;
    use crate::reference::nested_loop_join;

    type Row = (Key, Option<u32>, Option<u32>);

    /// Splits at `split_at` rows instead of [`SPLIT_ROWS`].
    fn buckets<V>(split_at: usize) -> KeyBuckets<Key, V> {
        KeyBuckets {
            split_at,
            ..KeyBuckets::new()
        }
    }

    fn joined(
        left: &[(Key, u32)],
        right: &[(Key, u32)],
        how: JoinType,
        split_at: usize,
    ) -> Vec<Row> {
        let (mut l, mut r) = (buckets(split_at), buckets(split_at));
        left.iter().cloned().for_each(|row| l.push(row));
        right.iter().cloned().for_each(|row| r.push(row));
        assert_eq!((l.len(), r.len()), (left.len(), right.len()));
        let mut rows = Vec::new();
        let mut logic = each_row(
            |k: &Key, a: Option<&u32>, b: Option<&u32>, _: &mut Vec<()>| {
                rows.push((k.clone(), a.copied(), b.copied()))
            },
        );
        join_buckets_logic(&mut l, &mut r, None, None, how, &mut logic, &mut Vec::new());
        rows.sort();
        rows
    }

    /// Rows with `keys` distinct keys, a hot key, NULLs, and keys of one side only.
    fn side(rows: usize, keys: i64, shift: i64) -> Vec<(Key, u32)> {
        (0..rows)
            .map(|row| {
                let key = match row % 10 {
                    0 => Key::Null,
                    1..=3 => Key::Int(7),
                    _ => Key::Int((row as i64 * 7_919) % keys + shift),
                };
                (key, row as u32)
            })
            .collect()
    }

    #[test]
    fn bucketed_joins_match_the_nested_loop_whether_split_on_both_sides_one_or_none() {
        // Split at 256 rows: both sides past it, one side only, neither.
        for (left_rows, right_rows) in [(3_000, 2_000), (3_000, 40), (40, 3_000), (200, 100)] {
            let left = side(left_rows, 500, 0);
            let right = side(right_rows, 500, 250);
            for how in JoinType::ALL {
                let mut expected = nested_loop_join(&left, &right, how);
                expected.sort();
                assert_eq!(
                    joined(&left, &right, how, 256),
                    expected,
                    "{how} {left_rows} x {right_rows}"
                );
            }
        }
    }

    #[test]
    fn bucketed_joins_in_steps_give_the_rows_of_a_join_in_one_go() {
        // Split on both sides, one side, neither; every step but the last spends its budget,
        // and one stepper joins pair after pair of partitions.
        let mut stepper = SteppedBuckets::new();
        for (left_rows, right_rows) in [(3_000, 2_000), (3_000, 40), (40, 3_000), (200, 100)] {
            let left = side(left_rows, 500, 0);
            let right = side(right_rows, 500, 250);
            for how in JoinType::ALL {
                let expected = joined(&left, &right, how, 256);
                for budget in [1, 333, usize::MAX] {
                    let (mut l, mut r) = (buckets(256), buckets(256));
                    left.iter().cloned().for_each(|row| l.push(row));
                    right.iter().cloned().for_each(|row| r.push(row));
                    let mut rows = Vec::new();
                    let mut logic = each_row(
                        |k: &Key, a: Option<&u32>, b: Option<&u32>, _: &mut Vec<()>| {
                            rows.push((k.clone(), a.copied(), b.copied()))
                        },
                    );
                    loop {
                        let mut left_over = budget;
                        let out = &mut Vec::new();
                        if stepper.step(
                            &mut l,
                            &mut r,
                            None,
                            None,
                            how,
                            &mut logic,
                            out,
                            &mut left_over,
                        ) {
                            break;
                        }
                        assert_eq!(left_over, 0);
                    }
                    assert!(l.is_empty() && r.is_empty());
                    rows.sort();
                    assert_eq!(
                        rows, expected,
                        "{how} {left_rows} x {right_rows} by {budget}"
                    );
                }
            }
        }
    }

    #[test]
    fn broadcast_rows_are_probed_from_every_bucket_once() {
        // Own left rows over many buckets, a broadcast right table: each own row pairs with its
        // broadcast partners once, and a full join pads the own rows that no broadcast row
        // matched (never the broadcast rows).
        let left = side(2_000, 300, 0);
        let mut broadcast = side(500, 300, 150);
        let mut whole = Vec::new();
        let table = BuildTable::new(&mut broadcast, false);
        let mut logic = each_row(
            |k: &Key, a: Option<&u32>, b: Option<&u32>, _: &mut Vec<()>| {
                whole.push((k.clone(), a.copied(), b.copied()))
            },
        );
        let mut own = left.clone();
        local_join_logic(
            &mut own,
            &mut [],
            None,
            Some(&table),
            JoinType::Full,
            &mut logic,
            &mut Vec::new(),
        );
        let mut bucketed = Vec::new();
        let mut logic = each_row(
            |k: &Key, a: Option<&u32>, b: Option<&u32>, _: &mut Vec<()>| {
                bucketed.push((k.clone(), a.copied(), b.copied()))
            },
        );
        let (mut l, mut r) = (buckets(64), buckets::<u32>(64));
        left.into_iter().for_each(|row| l.push(row));
        assert_eq!(l.bucket_count(), BUCKETS);
        join_buckets_logic(
            &mut l,
            &mut r,
            None,
            Some(&table),
            JoinType::Full,
            &mut logic,
            &mut Vec::new(),
        );
        whole.sort();
        bucketed.sort();
        assert!(whole.iter().any(|(_, _, right)| right.is_some()));
        assert_eq!(bucketed, whole);
    }

    #[test]
    fn a_partition_splits_once_at_the_threshold_and_keeps_every_row() {
        let mut buckets = KeyBuckets::new();
        for row in 0..SPLIT_ROWS - 1 {
            buckets.push((row as u64, row));
        }
        assert_eq!(buckets.bucket_count(), 1);
        buckets.push((u64::MAX, 0));
        assert_eq!(buckets.bucket_count(), BUCKETS);
        for row in 0..1_000 {
            buckets.push((row as u64, row));
        }
        assert_eq!(buckets.len(), SPLIT_ROWS + 1_000);
        let mut seen: Vec<usize> = Vec::new();
        for (index, bucket) in buckets.split.iter().enumerate() {
            for (key, value) in bucket.rows() {
                assert_eq!(bucket_of(key), index, "a row in another key's bucket");
                seen.push(*value);
            }
        }
        assert_eq!(seen.len(), buckets.len());
        // Hashes spread keys: no bucket holds more than twice its share.
        let most = buckets.split.iter().map(Bucket::len).max().unwrap();
        assert!(most < 2 * buckets.len() / BUCKETS, "{most}");
    }
}
